package winapi

// WSF_VISIBLE is USEROBJECTFLAGS.dwFlags' bit for a window station with
// visible display surfaces: the interactive one, WinSta0. Services,
// OpenSSH sessions and scheduled tasks that run whether or not the user
// is logged on get a non-interactive station ("Service-0x0-3e7$", ...)
// whose DACL a new logon or a restricted token cannot use.
const _WSF_VISIBLE = 0x0001

// NeedOwnStation reports whether a sandboxed process needs a window
// station of agentbox's making, given the USEROBJECTFLAGS.dwFlags of the
// current one: any non-interactive station.
func NeedOwnStation(stationFlags uint32) bool { return stationFlags&_WSF_VISIBLE == 0 }
