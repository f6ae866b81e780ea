package install

import (
	"strings"
	"testing"
)

// TestJSONEdits: entries go in laid out like their neighbours and come out
// leaving the text as it was, whatever the layout.
func TestJSONEdits(t *testing.T) {
	server := ordered{{"command", "ab"}, {"args", []string{"mcp"}}}
	for _, tc := range []struct {
		name, src, want string
	}{
		{"empty object", "{}", "{\n  \"mcpServers\": {\n    \"agentbox\": {\n      \"command\": \"ab\",\n      \"args\": [\n        \"mcp\"\n      ]\n    }\n  }\n}"},
		{"one line", `{"a": 1}`, `{"a": 1, "mcpServers": {"agentbox": {"command": "ab", "args": ["mcp"]}}}`},
		{"compact", `{"a":1}`, `{"a":1,"mcpServers":{"agentbox":{"command":"ab","args":["mcp"]}}}`},
		{"tabs", "{\n\t\"a\": 1\n}\n", "{\n\t\"a\": 1,\n\t\"mcpServers\": {\n\t\t\"agentbox\": {\n\t\t\t\"command\": \"ab\",\n\t\t\t\"args\": [\n\t\t\t\t\"mcp\"\n\t\t\t]\n\t\t}\n\t}\n}\n"},
		{"CRLF", "{\r\n  \"mcpServers\": {\r\n    \"x\": {}\r\n  }\r\n}\r\n", "{\r\n  \"mcpServers\": {\r\n    \"x\": {},\r\n    \"agentbox\": {\r\n      \"command\": \"ab\",\r\n      \"args\": [\r\n        \"mcp\"\r\n      ]\r\n    }\r\n  }\r\n}\r\n"},
		{"comment after the last member", "{\n  \"a\": 1 // one\n}\n", "{\n  \"a\": 1,\n  \"mcpServers\": {\n    \"agentbox\": {\n      \"command\": \"ab\",\n      \"args\": [\n        \"mcp\"\n      ]\n    }\n  } // one\n}\n"},
		{"escapes in keys", "{\"a\\u0022b\": \"\\\"\"}", "{\"a\\u0022b\": \"\\\"\", \"mcpServers\": {\"agentbox\": {\"command\": \"ab\", \"args\": [\"mcp\"]}}}"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := newJDoc([]byte(tc.src), true)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := d.setMember([]string{"mcpServers", "agentbox"}, server); err != nil {
				t.Fatal(err)
			}
			if got := string(d.src); got != tc.want {
				t.Errorf("install:\n%s", unified("want", "got", tc.want, got))
			}
			d.removeMember([]string{"mcpServers", "agentbox"}, keeper(mustDoc(t, tc.src)))
			if got := string(d.src); got != tc.src {
				t.Errorf("uninstall:\n%s", unified("want", "got", tc.src, got))
			}
		})
	}
}

func mustDoc(t *testing.T, src string) *jdoc {
	d, err := newJDoc([]byte(src), true)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestUninstallAfterUserEdits: entries the user added after install, next
// to agentbox's, stay.
func TestUninstallAfterUserEdits(t *testing.T) {
	d := mustDoc(t, "{\n  \"mcpServers\": {\n    \"a\": {}\n  }\n}\n")
	d.setMember([]string{"mcpServers", "agentbox"}, ordered{{"command", "x"}})
	d.setMember([]string{"mcpServers", "b"}, ordered{{"command", "y"}})
	d.removeMember([]string{"mcpServers", "agentbox"}, keeper(nil))
	want := "{\n  \"mcpServers\": {\n    \"a\": {},\n    \"b\": {\n      \"command\": \"y\"\n    }\n  }\n}\n"
	if got := string(d.src); got != want {
		t.Errorf("%s", unified("want", "got", want, got))
	}
}

// TestJSONParseErrors: what the parser refuses, and that nesting is
// bounded.
func TestJSONParseErrors(t *testing.T) {
	for _, src := range []string{
		`{"a": 1,}`, `[1,]`, `{"a" 1}`, `{"a": tru}`, `{"a": 01}`, `{"a": "\x01"}`, `{"a": 1} x`,
		`{"a": "unterminated}`, `{a: 1}`, "{\"a\": /* x */ 1", strings.Repeat("[", 5000) + strings.Repeat("]", 5000),
	} {
		if _, err := parseJSON([]byte(src), true); err == nil {
			t.Errorf("%.40q parsed", src)
		}
	}
	if _, err := parseJSON([]byte("{\"a\": 1 // c\n}"), false); err == nil {
		t.Errorf("a comment parsed as strict JSON")
	}
	// What follows a member or an element, in objects and arrays alike.
	for src, want := range map[string]string{
		`{"a": 1,}`:    "line 1: trailing comma",
		`[1, ]`:        "line 1: trailing comma",
		`{"a": 1`:      "line 1: unterminated object",
		"[1,\n2":       "line 2: unterminated array",
		`{"a": 1 "b"}`: "line 1: expected ',' or '}' in an object",
		`[1 2]`:        "line 1: expected ',' or ']' in an array",
	} {
		if _, err := parseJSON([]byte(src), true); err == nil || err.Error() != want {
			t.Errorf("%q: %v, want %s", src, err, want)
		}
	}
}
