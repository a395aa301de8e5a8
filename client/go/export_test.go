// export_test.go — what the external test package flurry_test (the examples) needs of the
// package's tests: marking that a test ran, for TestMain's check (main_test.go).
package flurry

// CountTestRun marks a test or example as run; the examples' stand-in server calls it.
func CountTestRun() { testsRun.Add(1) }
