//go:build race

package main

// raceEnabled says the tests run with the race detector: the gateway they start is
// built with it too.
const raceEnabled = true
