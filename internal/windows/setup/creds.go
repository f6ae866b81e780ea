package setup

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
)

// CredsVersion is the credentials file format.
const CredsVersion = 1

// Account is one sandbox user as stored in the credentials file. Password
// is the DPAPI blob (CryptProtectData, machine scope) of the UTF-8
// password; encoding/json stores it as base64.
type Account struct {
	User     string `json:"user"`
	SID      string `json:"sid"`
	Password []byte `json:"password_dpapi"`
}

// Creds is the credentials file.
type Creds struct {
	Version int     `json:"version"`
	Offline Account `json:"offline"`
	Online  Account `json:"online"`
}

// ParseCreds decodes the credentials file strictly.
func ParseCreds(b []byte) (*Creds, error) {
	c, err := decodeStrict[Creds](b, "credentials file")
	if err != nil {
		return nil, err
	}
	if c.Version != CredsVersion {
		return nil, fmt.Errorf("credentials file version %d, want %d: %w", c.Version, CredsVersion, ErrOutdated)
	}
	for _, a := range []Account{c.Offline, c.Online} {
		if a.User == "" || a.SID == "" || len(a.Password) == 0 {
			return nil, errors.New("credentials file: incomplete account")
		}
	}
	return c, nil
}

// Marshal encodes the credentials file.
func (c *Creds) Marshal() ([]byte, error) { return json.MarshalIndent(c, "", "  ") }

// Account returns the account for the network setting: Online when the
// policy allows network access, Offline otherwise.
func (c *Creds) Account(network bool) Account {
	if network {
		return c.Online
	}
	return c.Offline
}

// passwordAlphabet avoids characters that need quoting in net.exe or
// PowerShell should someone have to type one during recovery.
const (
	lower   = "abcdefghijkmnopqrstuvwxyz"
	upper   = "ABCDEFGHJKLMNPQRSTUVWXYZ"
	digits  = "23456789"
	symbols = "-_.+=#%@"
	all     = lower + upper + digits + symbols
)

// PasswordLen is long enough that the password is never the weak point
// (about 190 bits) and within Windows' 127-character limit.
const PasswordLen = 32

// NewPassword returns a random password from crypto/rand (Codex used a
// non-cryptographic generator). It always contains all four character
// classes so any complexity policy accepts it.
func NewPassword() (string, error) {
	for {
		b := make([]byte, PasswordLen)
		for i := range b {
			c, err := randIndex(len(all))
			if err != nil {
				return "", err
			}
			b[i] = all[c]
		}
		if bytes.ContainsAny(b, lower) && bytes.ContainsAny(b, upper) &&
			bytes.ContainsAny(b, digits) && bytes.ContainsAny(b, symbols) {
			return string(b), nil
		}
	}
}

// randIndex returns a uniform index below n by rejection sampling.
func randIndex(n int) (int, error) {
	limit := 256 - 256%n
	var b [1]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return 0, fmt.Errorf("password: %w", err)
		}
		if int(b[0]) < limit {
			return int(b[0]) % n, nil
		}
	}
}
