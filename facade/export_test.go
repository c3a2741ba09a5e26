package facade

// StripSummaryKey removes key from the snapshot summary a staged write
// will commit, to make a snapshot as written before key existed.
func StripSummaryKey(st Staged, key string) {
	delete(st.(*icebergStaged).props, key)
}
