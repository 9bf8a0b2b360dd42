// Package citest holds the repository's set-up contract in a test: the two
// commands README.md gives for a fresh machine are the first commands
// .ci/run runs, exactly as written, with nothing before them that a user
// following the README would not run. It has no code of its own.
package citest
