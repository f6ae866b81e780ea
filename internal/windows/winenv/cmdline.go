package winenv

import (
	"errors"
	"strings"
)

// QuoteArg quotes s for programs that split their command line with the
// MSVCRT rules (CommandLineToArgvW): quotes around arguments with space or
// tab or that are empty, '"' escaped as '\"', and backslashes doubled only
// where they precede a quote.
func QuoteArg(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n\v\"") {
		return s
	}
	var b strings.Builder
	b.WriteByte('"')
	slashes := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			slashes++
			b.WriteByte(c)
			continue
		case '"':
			b.WriteString(strings.Repeat(`\`, slashes+1))
		}
		slashes = 0
		b.WriteByte(c)
	}
	b.WriteString(strings.Repeat(`\`, slashes))
	b.WriteByte('"')
	return b.String()
}

// ErrBatchArg is returned for arguments that cannot be passed to a batch
// file safely: cmd.exe ends the command at a line break and no quoting
// survives it.
var ErrBatchArg = errors.New("argument for a batch file contains a line break or NUL")

// cmdSpecial are characters cmd.exe treats specially outside quotes, plus
// its argument delimiters.
const cmdSpecial = " \t\"&|<>()^%!,;="

// QuoteBatchArg quotes s for a batch file run through cmd.exe. cmd.exe
// expands %VAR% even inside quotes, so each '%' becomes "%%cd:~,%": cmd
// sees an empty name for the first '%' and leaves it, then expands
// "%cd:~,%" (an empty substring of %CD%) to nothing. Inside quotes '"' is
// doubled, the form batch files read back with %~1, and the other special
// characters are inert. Delayed expansion ('!') is switched off by the
// /v:off the caller puts on cmd's command line.
func QuoteBatchArg(s string) (string, error) {
	if strings.ContainsAny(s, "\r\n\x00") {
		return "", ErrBatchArg
	}
	if s != "" && !strings.ContainsAny(s, cmdSpecial) {
		return s, nil
	}
	var b strings.Builder
	b.WriteByte('"')
	slashes := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '\\':
			slashes++
			b.WriteByte(c)
			continue
		case '"':
			// Backslashes before a quote are doubled so a program
			// reading MSVCRT-style arguments sees them literally.
			b.WriteString(strings.Repeat(`\`, slashes))
			b.WriteString(`""`)
		case '%':
			b.WriteString("%%cd:~,%")
		default:
			b.WriteByte(c)
		}
		slashes = 0
	}
	b.WriteString(strings.Repeat(`\`, slashes))
	b.WriteByte('"')
	return b.String(), nil
}

// IsBatch reports whether path names a batch file, which CreateProcess
// runs through cmd.exe whatever the command line says.
func IsBatch(path string) bool {
	p := strings.ToLower(strings.TrimRight(path, ". "))
	return strings.HasSuffix(p, ".bat") || strings.HasSuffix(p, ".cmd")
}

// IsCmd reports whether path names cmd.exe.
func IsCmd(path string) bool {
	base := strings.ToLower(path[strings.LastIndexAny(path, `\/`)+1:])
	return base == "cmd" || base == "cmd.exe"
}

// CommandLine is what the child is started with: the program to pass as
// CreateProcess's lpApplicationName and the command line.
type CommandLine struct {
	App  string
	Line string
}

// Build returns the command line for running path (already resolved) with
// args (args[0] is the name the program sees).
//
//   - A batch file is run as `cmd.exe /d /e:on /v:off /s /c ""path" args"`
//     with each argument quoted by QuoteBatchArg; /s makes cmd strip exactly
//     the outer pair of quotes, /d skips AutoRun, /v:off disables '!'
//     expansion.
//   - cmd.exe itself: arguments up to and including the first /c or /k are
//     quoted MSVCRT-style; the rest is a command for cmd to parse and is
//     joined with spaces, unquoted, as the caller wrote it.
//   - Anything else: every argument quoted MSVCRT-style.
func Build(path string, args []string, comspec string) (CommandLine, error) {
	if len(args) == 0 {
		args = []string{path}
	}
	switch {
	case IsBatch(path):
		if comspec == "" {
			comspec = `C:\Windows\System32\cmd.exe`
		}
		var b strings.Builder
		b.WriteString(QuoteArg(comspec) + ` /d /e:on /v:off /s /c ""` + path + `"`)
		for _, a := range args[1:] {
			q, err := QuoteBatchArg(a)
			if err != nil {
				return CommandLine{}, err
			}
			b.WriteString(" " + q)
		}
		b.WriteString(`"`)
		return CommandLine{App: comspec, Line: b.String()}, nil
	case IsCmd(path):
		parts := []string{QuoteArg(args[0])}
		for i := 1; i < len(args); i++ {
			a := args[i]
			if strings.EqualFold(a, "/c") || strings.EqualFold(a, "/k") {
				parts = append(parts, a)
				if i+1 < len(args) {
					parts = append(parts, strings.Join(args[i+1:], " "))
				}
				break
			}
			parts = append(parts, QuoteArg(a))
		}
		return CommandLine{App: path, Line: strings.Join(parts, " ")}, nil
	}
	parts := make([]string, len(args))
	for i, a := range args {
		parts[i] = QuoteArg(a)
	}
	return CommandLine{App: path, Line: strings.Join(parts, " ")}, nil
}

// LookPath finds name as cmd.exe would with the child's PATH and PATHEXT:
// each directory in order, and in each directory each extension in
// PATHEXT order (name as given first if it already has an extension).
// A name containing a separator is only tried with extensions. exists
// reports whether a regular file is at a path.
func LookPath(name, path, pathext string, exists func(string) bool) (string, bool) {
	exts := strings.Split(strings.ToLower(pathext), ";")
	if pathext == "" {
		exts = []string{".com", ".exe", ".bat", ".cmd"}
	}
	try := func(p string) (string, bool) {
		if hasExt(p) && exists(p) {
			return p, true
		}
		for _, e := range exts {
			if e != "" && exists(p+e) {
				return p + e, true
			}
		}
		return "", false
	}
	if strings.ContainsAny(name, `\/:`) {
		return try(name)
	}
	for _, d := range strings.Split(path, ";") {
		d = strings.Trim(d, `"`)
		if d == "" {
			continue
		}
		if p, ok := try(strings.TrimRight(d, `\/`) + `\` + name); ok {
			return p, true
		}
	}
	return "", false
}

func hasExt(p string) bool {
	base := p[strings.LastIndexAny(p, `\/`)+1:]
	return strings.Contains(base, ".")
}
