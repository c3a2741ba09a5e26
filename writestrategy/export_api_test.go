package writestrategy

// Names the external tests use.
type Query = queryStrategy
