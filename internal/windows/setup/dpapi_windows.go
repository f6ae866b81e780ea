package setup

import (
	"os"
	"runtime"
	"unsafe"

	"golang.org/x/sys/windows"
)

// protect encrypts b with DPAPI in machine scope (CRYPTPROTECT_LOCAL_MACHINE):
// the elevated setup may run as a different administrator than the user
// who later runs agentbox, so a user-scoped key would not decrypt. Machine
// scope means any local account could decrypt the blob, which is why the
// file lives in a directory the sandbox group is denied.
func protect(b []byte) ([]byte, error) {
	return dpapi(b, true)
}

// unprotect reverses protect.
func unprotect(b []byte) ([]byte, error) {
	return dpapi(b, false)
}

func dpapi(b []byte, enc bool) ([]byte, error) {
	if len(b) == 0 {
		b = []byte{}
	}
	in := windows.DataBlob{Size: uint32(len(b))}
	if len(b) > 0 {
		in.Data = &b[0]
	}
	var out windows.DataBlob
	var err error
	flags := uint32(windows.CRYPTPROTECT_UI_FORBIDDEN)
	if enc {
		flags |= windows.CRYPTPROTECT_LOCAL_MACHINE
		err = windows.CryptProtectData(&in, windows.StringToUTF16Ptr("agentbox"), nil, 0, nil, flags, &out)
	} else {
		err = windows.CryptUnprotectData(&in, nil, nil, 0, nil, flags, &out)
	}
	runtime.KeepAlive(b)
	if err != nil {
		if enc {
			return nil, os.NewSyscallError("CryptProtectData", err)
		}
		return nil, os.NewSyscallError("CryptUnprotectData", err)
	}
	defer windows.LocalFree(windows.Handle(unsafe.Pointer(out.Data)))
	res := make([]byte, out.Size)
	copy(res, unsafe.Slice(out.Data, out.Size))
	return res, nil
}
