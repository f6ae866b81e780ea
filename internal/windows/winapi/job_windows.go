package winapi

import (
	"errors"
	"os"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Job is a job object whose processes all die when it is closed
// (JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE) and which gives no way out:
// breakaway is not allowed, so every descendant of a process in the job
// stays in it. Its UI restrictions (UIRestrictions) keep the tree away from
// other processes' windows, the clipboard, global atoms, system
// parameters, display settings, desktop switching and logoff/shutdown.
type Job struct {
	h windows.Handle
	// UIRestricted reports that JOBOBJECT_BASIC_UI_RESTRICTIONS were set.
	// It is false when this process is already in a job (Limits.Nested)
	// and under Wine, which does not implement them; otherwise NewJob
	// fails instead.
	UIRestricted bool
	// Limits says which limits held (see PlanJob).
	Limits JobLimits
}

// UIRestrictions is the JOBOBJECT_BASIC_UI_RESTRICTIONS class every
// sandbox job gets.
const UIRestrictions = windows.JOB_OBJECT_UILIMIT_HANDLES |
	windows.JOB_OBJECT_UILIMIT_READCLIPBOARD |
	windows.JOB_OBJECT_UILIMIT_WRITECLIPBOARD |
	windows.JOB_OBJECT_UILIMIT_GLOBALATOMS |
	windows.JOB_OBJECT_UILIMIT_SYSTEMPARAMETERS |
	windows.JOB_OBJECT_UILIMIT_DESKTOP |
	windows.JOB_OBJECT_UILIMIT_DISPLAYSETTINGS |
	windows.JOB_OBJECT_UILIMIT_EXITWINDOWS

// ErrWineUI is why a job under Wine has no UI restrictions.
var ErrWineUI = errors.New("wine does not implement JOBOBJECT_BASIC_UI_RESTRICTIONS")

// InJob reports whether this process is already in a job, which the
// children it creates then belong to as well.
func InJob() (bool, error) {
	var in int32
	if err := isProcessInJob(windows.CurrentProcess(), 0, &in); err != nil {
		return false, os.NewSyscallError("IsProcessInJob", err)
	}
	return in != 0, nil
}

// NewJob creates an unnamed kill-on-close job for a child of this
// process, with UI restrictions unless this process is in a job already
// (PlanJob).
func NewJob() (*Job, error) {
	inJob, err := InJob()
	if err != nil {
		return nil, err
	}
	return newJob(PlanJob(inJob))
}

func newJob(plan JobLimits) (*Job, error) {
	h, err := windows.CreateJobObject(nil, nil)
	if err != nil {
		return nil, os.NewSyscallError("CreateJobObject", err)
	}
	var info windows.JOBOBJECT_EXTENDED_LIMIT_INFORMATION
	info.BasicLimitInformation.LimitFlags = windows.JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE | windows.JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION
	if _, err := windows.SetInformationJobObject(h, windows.JobObjectExtendedLimitInformation,
		uintptr(unsafe.Pointer(&info)), uint32(unsafe.Sizeof(info))); err != nil {
		windows.CloseHandle(h)
		return nil, os.NewSyscallError("SetInformationJobObject", err)
	}
	j := &Job{h: h, Limits: JobLimits{Nested: plan.Nested}}
	if !plan.UI {
		return j, nil
	}
	ui := windows.JOBOBJECT_BASIC_UI_RESTRICTIONS{UIRestrictionsClass: UIRestrictions}
	if _, err := windows.SetInformationJobObject(h, windows.JobObjectBasicUIRestrictions,
		uintptr(unsafe.Pointer(&ui)), uint32(unsafe.Sizeof(ui))); err != nil {
		if !IsWine() {
			windows.CloseHandle(h)
			return nil, os.NewSyscallError("SetInformationJobObject(JobObjectBasicUIRestrictions)", err)
		}
		// Wine only: it enforces no token or ACL either; tests say so.
	} else {
		j.UIRestricted = true
		j.Limits.UI = true
	}
	return j, nil
}

// Handle returns the job's handle.
func (j *Job) Handle() windows.Handle { return j.h }

// Assign puts a process in the job.
func (j *Job) Assign(p windows.Handle) error {
	return os.NewSyscallError("AssignProcessToJobObject", windows.AssignProcessToJobObject(j.h, p))
}

// Contains reports whether p is in the job.
func (j *Job) Contains(p windows.Handle) (bool, error) {
	var in int32
	if err := isProcessInJob(p, j.h, &in); err != nil {
		return false, os.NewSyscallError("IsProcessInJob", err)
	}
	return in != 0, nil
}

// Terminate kills every process in the job with exit code code.
func (j *Job) Terminate(code uint32) error {
	return os.NewSyscallError("TerminateJobObject", windows.TerminateJobObject(j.h, code))
}

// Close closes the job handle, which kills whatever is still in it.
func (j *Job) Close() error {
	if j.h == 0 {
		return nil
	}
	err := windows.CloseHandle(j.h)
	j.h = 0
	return os.NewSyscallError("CloseHandle(job)", err)
}
