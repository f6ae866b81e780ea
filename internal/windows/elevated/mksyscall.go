package elevated

// CreateProcessWithLogonW is not in golang.org/x/sys/windows (nor in
// internal/windows/winapi, which the unelevated backend shares).

//go:generate go run golang.org/x/sys/windows/mkwinsyscall -output zsyscall_windows.go mksyscall.go

//sys createProcessWithLogon(user *uint16, domain *uint16, password *uint16, logonFlags uint32, app *uint16, cmdLine *uint16, creationFlags uint32, env *uint16, dir *uint16, si *windows.StartupInfo, pi *windows.ProcessInformation) (err error) = advapi32.CreateProcessWithLogonW
