// Package winapi holds the Win32 calls of agentbox's Windows sandbox as
// typed wrappers: the write-restricted token recipe, kill-on-close job
// objects, suspended process creation under a token, and file DACLs read
// and written as SDDL. Both the unelevated backend and agentbox-runner
// (elevated mode) use them.
//
// Calls that golang.org/x/sys/windows lacks are generated from the //sys
// lines below into zsyscall_windows.go; run `go generate` after editing.
package winapi

//go:generate go run golang.org/x/sys/windows/mkwinsyscall -output zsyscall_windows.go mksyscall.go

//sys createRestrictedToken(existing windows.Token, flags uint32, disableSidCount uint32, sidsToDisable *windows.SIDAndAttributes, deletePrivilegeCount uint32, privilegesToDelete *windows.LUIDAndAttributes, restrictedSidCount uint32, sidsToRestrict *windows.SIDAndAttributes, newToken *windows.Token) (err error) = advapi32.CreateRestrictedToken
//sys isProcessInJob(process windows.Handle, job windows.Handle, result *int32) (err error) = kernel32.IsProcessInJob
//sys createDesktop(name *uint16, device *uint16, devmode uintptr, flags uint32, access uint32, sa *windows.SecurityAttributes) (h windows.Handle, err error) [failretval==0] = user32.CreateDesktopW
//sys closeDesktop(h windows.Handle) (err error) = user32.CloseDesktop
//sys getProcessWindowStation() (h windows.Handle, err error) [failretval==0] = user32.GetProcessWindowStation
//sys getUserObjectInformation(obj windows.Handle, index int32, info *uint16, length uint32, needed *uint32) (err error) = user32.GetUserObjectInformationW
//sys createWindowStation(name *uint16, flags uint32, access uint32, sa *windows.SecurityAttributes) (h windows.Handle, err error) [failretval==0] = user32.CreateWindowStationW
//sys closeWindowStation(h windows.Handle) (err error) = user32.CloseWindowStation
//sys setProcessWindowStation(h windows.Handle) (err error) = user32.SetProcessWindowStation
