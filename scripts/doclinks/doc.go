// Package doclinks checks the relative links of the project's markdown
// documents: every link to another file names one that exists, and every
// #anchor names a heading of its target, as GitHub renders them.
//
// The check is pure (Check reads documents through a lookup function); the
// test in this package runs it over every *.md file of the repository, so a
// moved or renamed section fails `go test` naming the document, line and link.
package doclinks
