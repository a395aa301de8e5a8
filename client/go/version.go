// version.go — the client's release, the project's one version (the file VERSION at the
// repository root; version_test.go checks they are equal). A Go module has no version field:
// a user's go.mod names it in its require line (README "Install").

package flurry

// Version is this client's release: flurry's version.
const Version = "0.2.0"
