package cardano

// Options configure an Adapter. The zero value is valid and is what real data
// needs: every block's body hash is checked against its header.
type Options struct {
	// skipBodyHash turns the body-hash check off. Unexported on purpose: only
	// this package's tests, which patch real blocks to build cases the data
	// lacks (a phase-2-invalid transaction), may turn it off.
	skipBodyHash bool
}

// EnsureDefaults returns o with every unset field set to its default (there
// is none to fill today; the method keeps the shape every Options type of the
// project has).
func (o Options) EnsureDefaults() Options { return o }

// Validate reports an unsupported setting (none today).
func (o Options) Validate() error { return nil }
