//go:build linux

package shm

// pause is the x86 PAUSE instruction: a cheap delay between polls that
// also tells the core a spin loop is running.
func pause()
