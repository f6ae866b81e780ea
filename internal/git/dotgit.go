package git

import (
	"bytes"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/agentbox/agentbox/internal/fspath"
)

// ReadGitdirFile parses a "gitdir: <path>" file as git writes it for
// worktrees and submodules; a relative path is relative to the file.
func ReadGitdirFile(path string) (string, error) {
	data, err := ReadSmall(path)
	if err != nil {
		return "", fmt.Errorf("reading %s: %w", path, err)
	}
	// As git reads it (setup.c, read_gitfile_gently): the whole file,
	// which must start with "gitdir: ", less trailing CR and LF only;
	// spaces and inner newlines are part of the path.
	rest, ok := bytes.CutPrefix(data, []byte("gitdir: "))
	if !ok {
		return "", nil
	}
	dir := strings.TrimRight(string(rest), "\r\n")
	if dir == "" {
		return "", nil
	}
	return fspath.JoinRaw(filepath.Dir(path), dir), nil
}

// ReadCommondir reads a worktree gitdir's "commondir" as git does
// (path.c): trailing CR and LF trimmed, relative to the gitdir.
func ReadCommondir(gitdir string) (string, error) {
	dir, err := readLine(filepath.Join(gitdir, "commondir"))
	if err != nil || dir == "" {
		return "", err
	}
	return fspath.JoinRaw(gitdir, dir), nil
}

// ReadWorktreeGitdir reads the "gitdir" file of a linked worktree's git
// directory wgd (<common>/worktrees/<id>): the worktree's .git file, an
// absolute path git writes itself ("" for anything else).
func ReadWorktreeGitdir(wgd string) (string, error) {
	dotgit, err := readLine(filepath.Join(wgd, "gitdir"))
	if err != nil || !filepath.IsAbs(dotgit) {
		return "", err
	}
	return dotgit, nil
}

// readLine reads a file git keeps one path in, less trailing CR and LF.
func readLine(path string) (string, error) {
	data, err := ReadSmall(path)
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(data), "\r\n"), nil
}
