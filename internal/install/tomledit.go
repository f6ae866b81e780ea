package install

import (
	"bytes"
	"fmt"
	"regexp"
	"strings"

	"github.com/pelletier/go-toml/v2"
)

// Codex's config.toml is edited as text too: agentbox's tables go in one
// marked block at the end, so the user's own lines stay byte for byte and
// uninstall takes out exactly the block. Where the user already has a
// [features] table (TOML allows a table once), the keys agentbox needs go
// into it as lines tagged with codexTag.

const (
	codexBegin      = "# >>> agentbox: added by `agentbox install codex`; `agentbox uninstall codex` removes it"
	codexBeginNoEOL = codexBegin + " (and the newline before it)"
	codexEnd        = "# <<< agentbox"
	codexTag        = " # added by agentbox install"
)

// codexFeatures are the [features] keys that turn Codex's own shell tools
// off: shell_tool (the classic shell) and unified_exec (the PTY-backed
// exec_command), so commands go through agentbox's MCP run tool.
var codexFeatures = []string{"shell_tool", "unified_exec"}

var featuresHeader = regexp.MustCompile(`^[ \t]*\[[ \t]*features[ \t]*\][ \t]*(#.*)?$`)

// codexStrip removes what codexAdd added: the marked block and the tagged
// lines. It fails on a block whose end marker is gone.
func codexStrip(src []byte) ([]byte, bool, error) {
	s := string(src)
	changed := false
	if i := strings.Index(s, codexBegin); i >= 0 && (i == 0 || s[i-1] == '\n') {
		j := strings.Index(s[i:], "\n"+codexEnd+"\n")
		if j < 0 {
			return nil, false, fmt.Errorf("the agentbox block has no end line %q: remove the block by hand", codexEnd)
		}
		end := i + j + len("\n"+codexEnd+"\n")
		start := i
		// The separator codexAdd wrote before the block.
		noEOL := strings.HasPrefix(s[i:], codexBeginNoEOL)
		switch {
		case noEOL && strings.HasSuffix(s[:start], "\n\n"):
			start -= 2
		case strings.HasSuffix(s[:start], "\n\n"):
			start--
		}
		s = s[:start] + s[end:]
		changed = true
	}
	var out []string
	lines := strings.SplitAfter(s, "\n")
	for _, l := range lines {
		if strings.HasSuffix(strings.TrimRight(l, "\r\n"), codexTag) {
			changed = true
			continue
		}
		out = append(out, l)
	}
	return []byte(strings.Join(out, "")), changed, nil
}

// codexAdd returns src with agentbox's MCP server and the shell switches
// added (after removing any earlier ones), or an error naming what in the
// user's own configuration is in the way.
func codexAdd(src []byte, command string, args []string) ([]byte, error) {
	base, _, err := codexStrip(src)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := toml.Unmarshal(base, &doc); err != nil {
		return nil, fmt.Errorf("not valid TOML: %w", err)
	}
	if servers, ok := doc["mcp_servers"].(map[string]any); ok {
		if _, ok := servers["agentbox"]; ok {
			return nil, fmt.Errorf("it already has [mcp_servers.agentbox], not written by agentbox install: remove or rename that table and run again")
		}
	} else if _, ok := doc["mcp_servers"]; ok {
		return nil, fmt.Errorf("mcp_servers is not a table")
	}
	s := string(base)
	var block strings.Builder
	fmt.Fprintf(&block, "[mcp_servers.agentbox]\ncommand = %s\nargs = [", tomlString(command))
	for i, a := range args {
		if i > 0 {
			block.WriteString(", ")
		}
		block.WriteString(tomlString(a))
	}
	block.WriteString("]\n")
	if feats, ok := doc["features"]; ok {
		fm, ok := feats.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("features is not a table")
		}
		var add []string
		for _, k := range codexFeatures {
			switch v, ok := fm[k]; {
			case !ok:
				add = append(add, k+" = false"+codexTag+"\n")
			case v == false:
			default:
				return nil, fmt.Errorf("it sets features.%s = %v; agentbox install turns Codex's own shell off: remove that line and run again", k, v)
			}
		}
		if len(add) > 0 {
			lines := strings.SplitAfter(s, "\n")
			at := -1
			for i, l := range lines {
				if featuresHeader.MatchString(strings.TrimRight(l, "\r\n")) {
					at = i
					break
				}
			}
			if at < 0 {
				return nil, fmt.Errorf("its features are not set in a [features] table (dotted keys or an inline table): write them as a [features] table and run again")
			}
			if !strings.HasSuffix(lines[at], "\n") {
				return nil, fmt.Errorf("its [features] table is empty at the end of the file: add a newline after it")
			}
			rest := append([]string{}, lines[at+1:]...)
			lines = append(append(lines[:at+1], add...), rest...)
			s = strings.Join(lines, "")
		}
	} else {
		block.WriteString("\n[features]\n")
		for _, k := range codexFeatures {
			block.WriteString(k + " = false\n")
		}
	}
	begin := codexBegin
	switch {
	case s == "":
	case strings.HasSuffix(s, "\n"):
		s += "\n"
	default:
		s += "\n\n"
		begin = codexBeginNoEOL
	}
	out := []byte(s + begin + "\n" + block.String() + codexEnd + "\n")
	if err := codexCheck(out, command, args); err != nil {
		return nil, err
	}
	return out, nil
}

// codexCheck parses the merged file as Codex will and confirms it says
// what agentbox meant: a merge that TOML reads differently is refused.
func codexCheck(src []byte, command string, args []string) error {
	var doc struct {
		MCP map[string]struct {
			Command string   `toml:"command"`
			Args    []string `toml:"args"`
		} `toml:"mcp_servers"`
		Features map[string]any `toml:"features"`
	}
	if err := toml.Unmarshal(src, &doc); err != nil {
		return fmt.Errorf("the merged file would not be valid TOML (%v): fix the file or add the entry by hand", err)
	}
	s := doc.MCP["agentbox"]
	if s.Command != command || strings.Join(s.Args, "\x00") != strings.Join(args, "\x00") {
		return fmt.Errorf("the merged file does not read back as [mcp_servers.agentbox]")
	}
	for _, k := range codexFeatures {
		if doc.Features[k] != false {
			return fmt.Errorf("the merged file does not read back features.%s = false", k)
		}
	}
	return nil
}

// tomlString is s as a TOML basic string.
func tomlString(s string) string {
	var b bytes.Buffer
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"' || r == '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\u%04X", r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
