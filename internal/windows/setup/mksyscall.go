package setup

// Win32 calls agentbox-setup needs that golang.org/x/sys/windows lacks.
// Results named neterr follow NET_API_STATUS: non-zero is the error.

//go:generate go run golang.org/x/sys/windows/mkwinsyscall -output zsyscall_windows.go mksyscall.go

//sys netUserAdd(server *uint16, level uint32, buf *byte, parmErr *uint32) (neterr error) = netapi32.NetUserAdd
//sys netUserSetInfo(server *uint16, user *uint16, level uint32, buf *byte, parmErr *uint32) (neterr error) = netapi32.NetUserSetInfo
//sys netUserDel(server *uint16, user *uint16) (neterr error) = netapi32.NetUserDel
//sys netLocalGroupAdd(server *uint16, level uint32, buf *byte, parmErr *uint32) (neterr error) = netapi32.NetLocalGroupAdd
//sys netLocalGroupDel(server *uint16, group *uint16) (neterr error) = netapi32.NetLocalGroupDel
//sys netLocalGroupAddMembers(server *uint16, group *uint16, level uint32, buf *byte, total uint32) (neterr error) = netapi32.NetLocalGroupAddMembers
//sys shellExecuteEx(info *shellExecuteInfo) (err error) = shell32.ShellExecuteExW
//sys deleteProfile(sid *uint16, path *uint16, computer *uint16) (err error) = userenv.DeleteProfileW
