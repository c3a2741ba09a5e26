package identity

// Lifecycle defaults the facade and its double (facadetest) apply alike to
// a zero Lifecycle.KeepLast and Lifecycle.EveryCommits.
const (
	DefaultKeepLast     = 10
	DefaultEveryCommits = 10
)
