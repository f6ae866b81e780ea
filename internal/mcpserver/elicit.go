package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentbox/agentbox/sandbox"
)

// How the server asks the user for a call's request_permissions: an MCP
// elicitation (elicitation/create, protocol 2025-06-18) sent through the
// client of the call that asks, naming every directory and domain and the
// reason, with one field, scope. Only "accept" grants; "decline",
// "cancel", an error, no answer within approvalTimeout and a client that
// did not declare the elicitation capability refuse, and the command does
// not run. The request comes from the model; the grant only from the
// client's answer, which the model does not write: nothing in a call's
// arguments, stdin or a command's output can grant anything.

// approvalTimeout bounds the wait for the user's answer (the call's own
// timeout_seconds, when shorter, ends it first).
var approvalTimeout = 10 * time.Minute

// callKey is the context key of the *mcp.ServerSession of the call
// whose command asks.
type callKey struct{}

// scopeSchema is the elicitation's requestedSchema: exactly one
// property, the grant's scope.
var scopeSchema = map[string]any{
	"type": "object",
	"properties": map[string]any{
		"scope": map[string]any{
			"type":        "string",
			"title":       "Allow for",
			"description": "once: this command only; session: this and every later command of this agentbox session",
			"enum":        []string{"once", "session"},
			"default":     "once",
		},
	},
	"required": []string{"scope"},
}

// errNoElicitation refuses a request from a client that cannot ask its
// user.
var errNoElicitation = errors.New("the MCP client did not declare the elicitation capability, so agentbox cannot ask the user")

// approve is the session's approval hook: it asks the user through the
// client of the call in ctx.
func approve(ctx context.Context, r sandbox.Request) (sandbox.Grant, error) {
	ss, _ := ctx.Value(callKey{}).(*mcp.ServerSession)
	if ss == nil {
		return sandbox.Grant{}, errors.New("no MCP client to ask the user through")
	}
	if ip := ss.InitializeParams(); ip == nil || ip.Capabilities == nil || ip.Capabilities.Elicitation == nil {
		return sandbox.Grant{}, errNoElicitation
	}
	ctx, cancel := context.WithTimeout(ctx, approvalTimeout)
	defer cancel()
	res, err := ss.Elicit(ctx, &mcp.ElicitParams{Message: askMessage(r), RequestedSchema: scopeSchema})
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return sandbox.Grant{}, fmt.Errorf("the user did not answer within %v", approvalTimeout)
		}
		return sandbox.Grant{}, fmt.Errorf("asking the user: %w", err)
	}
	switch res.Action {
	case "accept":
	case "decline":
		return sandbox.Grant{}, errors.New("the user declined")
	case "cancel":
		return sandbox.Grant{}, errors.New("the user dismissed the question (cancel)")
	default:
		return sandbox.Grant{}, fmt.Errorf("the client answered %q, neither accept, decline nor cancel", res.Action)
	}
	// The SDK checked the content against scopeSchema and filled in
	// the default.
	switch scope, _ := res.Content["scope"].(string); scope {
	case "once", "":
		return sandbox.Grant{Scope: sandbox.Once}, nil
	case "session":
		return sandbox.Grant{Scope: sandbox.ForSession}, nil
	default:
		return sandbox.Grant{}, fmt.Errorf("the answer's scope %q is neither once nor session", scope)
	}
}

// askMessage is what the user reads: the command, each directory and
// domain, and the reason, in the model's words and marked as such.
func askMessage(r sandbox.Request) string {
	var b strings.Builder
	b.WriteString("agentbox: the agent asks for more than the sandbox allows")
	if len(r.Command) > 0 {
		fmt.Fprintf(&b, ", to run: %s", quoteArgv(r.Command))
	}
	b.WriteString("\n")
	if len(r.AddDirs) > 0 {
		b.WriteString("Write access beneath:\n")
		for _, d := range r.AddDirs {
			fmt.Fprintf(&b, "  - %s\n", printable(d))
		}
	}
	if len(r.AllowDomains) > 0 {
		b.WriteString("Network access to:\n")
		for _, d := range r.AllowDomains {
			fmt.Fprintf(&b, "  - %s\n", printable(d))
		}
	}
	// The model's words on one line, cut short: they must not pass for
	// more of the question (a line break and "Write access beneath:
	// nothing" of its own).
	reason := strings.TrimSpace(strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return ' '
		}
		return r
	}, r.Reason))
	if n := 500; len([]rune(reason)) > n {
		reason = string([]rune(reason)[:n]) + "…"
	}
	if reason == "" {
		reason = "(none given)"
	}
	fmt.Fprintf(&b, "The agent's reason: %s\n", reason)
	b.WriteString("Accept with scope \"once\" for this command only, or \"session\" for every later command of this session; decline to refuse (the command does not run).")
	return b.String()
}

// printable is s, or s quoted (Go syntax) when it holds a line break or
// another character that does not print.
func printable(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

// quoteArgv shows argv as a shell would read it back (an argument with
// a character that does not print, in Go syntax).
func quoteArgv(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		if printable(a) != a {
			q[i] = strconv.Quote(a)
			continue
		}
		if a != "" && !strings.ContainsFunc(a, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./=:,+@%", r))
		}) {
			q[i] = a
			continue
		}
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// restartHint says how the user grants r for good.
func restartHint(r sandbox.Request) string {
	var flags []string
	for _, d := range r.AddDirs {
		flags = append(flags, "--add-dir "+quoteArgv([]string{d}))
	}
	for _, d := range r.AllowDomains {
		flags = append(flags, "--allow-domain "+quoteArgv([]string{d}))
	}
	if len(flags) == 0 {
		return ""
	}
	return "To allow it without asking, the user can restart agentbox mcp with " + strings.Join(flags, " ") + " (for a directory, only one the trust rules accept as a writable root)."
}
