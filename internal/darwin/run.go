package darwin

import (
	"context"
	"os/exec"
)

// Command returns a command that runs argv under the Seatbelt profile for
// in, through [SandboxExec]. The paths of in are first canonicalised to
// their on-disk spelling (symbolic links resolved, case and Unicode form as
// stored), because that is what Seatbelt compares them with.
//
// The command runs in a new session, hence its own process group, so it
// has no controlling terminal to inject input into (TIOCSTI) and the whole
// group can be killed at once: when ctx ends, Cancel sends SIGKILL to the
// group. sandbox-exec executes argv in its own process, so the exit status
// and signals are those of the command itself. The caller sets Stdin,
// Stdout, Stderr, Env and Dir as for any exec.Cmd, and should call
// [KillGroup] after Wait so that background processes the command left
// behind die with the run.
//
// Command fails on every platform but darwin.
func Command(ctx context.Context, in Input, argv []string) (*exec.Cmd, error) {
	return command(ctx, in, argv)
}

// KillGroup sends SIGKILL to every process left in cmd's process group.
// Call it after cmd.Wait: the group outlives its leader while any member
// does, and the kernel does not reuse its id while it exists. A process that
// started a new session or process group of its own has left the group;
// macOS has no PID namespace or job object to catch it.
func KillGroup(cmd *exec.Cmd) error {
	return killGroup(cmd)
}

// Check compiles and applies the profile for in by running /usr/bin/true
// under it, and returns sandbox-exec's complaint if that fails. sandbox-exec
// reports a profile it rejects only through its own exit status and
// stderr, which a caller cannot tell apart from the command's; doctor, and
// a caller that wants to fail closed with a clear reason, run this first.
func Check(ctx context.Context, in Input) error {
	return check(ctx, in)
}
