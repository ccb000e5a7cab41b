// Package providertest holds the test harness shared by the provider adapters' tests: a
// recording loopback server and its canned replies, golden-file and line comparisons,
// stream draining and the stream checks every adapter must pass, an estimator that
// records what it counts, and benchmark inputs.
//
// It is imported only by _test files. Helpers that take a testing.TB fail it on their own;
// the others are plain functions. Nothing here touches the network beyond 127.0.0.1.
package providertest
