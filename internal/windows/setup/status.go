package setup

// Status is what doctor shows about elevated mode.
type Status struct {
	// Marker is the recorded setup, nil when setup never ran.
	Marker *Marker
	// Err is why elevated runs are refused right now (wraps ErrMissing or
	// ErrOutdated), nil when they can run.
	Err error
	// GrantsDone is true once the background read-grant pass finished;
	// Granted counts the paths it put an ACE on.
	GrantsDone bool
	Granted    int
	// Base is the state directory.
	Base string
}
