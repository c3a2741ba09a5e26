// Package readmetest holds the test that builds and runs the Go snippets of
// the repository's README.md as written, so that the README's embedding
// instructions keep compiling and keep producing the table they describe.
package readmetest
