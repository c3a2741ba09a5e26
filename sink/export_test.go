package sink

// ResolverLen is r.len.
func ResolverLen(r *Resolver) int { return r.len() }
