package elevated

// How agentbox starts agentbox-runner with CreateProcessWithLogonW.
//
// That function documents that "the CREATE_DEFAULT_ERROR_MODE,
// CREATE_NEW_CONSOLE, and CREATE_NEW_PROCESS_GROUP flags are enabled by
// default" and does not list CREATE_NO_WINDOW among the flags it takes
// (https://learn.microsoft.com/windows/win32/api/winbase/nf-winbase-createprocesswithlogonw):
// the runner, a console program, gets a new console whose window flashes
// up for every elevated command. STARTF_USESHOWWINDOW with SW_HIDE makes
// the new console start hidden ("STARTUPINFOW": wShowWindow is used by
// the new process's first window, its console window included). The
// runner talks to agentbox over named pipes, never over this console,
// and starts the command with a hidden console of its own.
const (
	_CREATE_NO_WINDOW           = 0x08000000
	_CREATE_UNICODE_ENVIRONMENT = 0x00000400
	_STARTF_USESHOWWINDOW       = 0x00000001
	_SW_HIDE                    = 0
)

// runnerStartup is the creation flags and STARTUPINFO fields the runner
// is started with.
type runnerStartup struct {
	CreationFlags uint32
	StartupFlags  uint32
	ShowWindow    uint16
}

func runnerLaunch() runnerStartup {
	return runnerStartup{
		// CREATE_NO_WINDOW is kept in case a Windows version honours it.
		CreationFlags: _CREATE_NO_WINDOW | _CREATE_UNICODE_ENVIRONMENT,
		StartupFlags:  _STARTF_USESHOWWINDOW,
		ShowWindow:    _SW_HIDE,
	}
}
