package loopguard

// Win32 calls loopguard needs that golang.org/x/sys/windows lacks.
// GetExtendedTcpTable returns its error code rather than setting the
// thread's last error, hence errcode.

//go:generate go run golang.org/x/sys/windows/mkwinsyscall -output zsyscall_windows.go mksyscall.go

//sys getExtendedTcpTable(table *byte, size *uint32, order bool, family uint32, class uint32, reserved uint32) (errcode error) = iphlpapi.GetExtendedTcpTable
