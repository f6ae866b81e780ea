package winapi

import "golang.org/x/sys/windows"

// IsWine reports whether the process runs under Wine, detected by the
// wine_get_version export of ntdll. Wine accepts restricted tokens and
// ACLs without enforcing them, so enforcement tests skip there.
func IsWine() bool {
	return windows.NewLazySystemDLL("ntdll.dll").NewProc("wine_get_version").Find() == nil
}
