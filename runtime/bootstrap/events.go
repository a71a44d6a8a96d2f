package bootstrap

import "fmt"

// EventKind says what happened to the job.
type EventKind uint8

// Event kinds, in the order a healthy job produces them: Joined x nranks, AllJoined,
// Left x nranks, AllLeft. A failing job produces Failed or Lost for the first rank that
// failed, then one Aborted carrying the cause the root fanned out to every rank, then
// Failed, Lost or Left for the others as they go. (A rank that left cleanly before a round
// that needed it has Left, then Aborted names it as having left early.) Each rank gets at
// most one of Failed, Lost and Left; the first Aborted is the job's cause.
const (
	EventJoined    EventKind = 1 // a rank joined; Info is set
	EventAllJoined EventKind = 2 // every rank joined and was sent the peer table
	EventFailed    EventKind = 3 // a rank called Abort, misused the protocol or left early; Err is its *RankError
	EventLost      EventKind = 4 // a rank's connection dropped without a clean Close; Err is its *RankError
	EventLeft      EventKind = 5 // a rank closed cleanly
	EventAllLeft   EventKind = 6 // every rank closed cleanly: the job is over
	EventAborted   EventKind = 7 // the job is aborted; Err is the first *RankError, sent to every rank
)

// String returns the event kind's name.
func (k EventKind) String() string {
	names := [...]string{"", "joined", "all joined", "failed", "lost", "left", "all left", "aborted"}
	if k != 0 && int(k) < len(names) {
		return names[k]
	}
	return fmt.Sprintf("event(%d)", uint8(k))
}

// Event is one thing that happened to the job, for the launcher's supervisor.
type Event struct {
	Kind EventKind
	Rank int      // the rank concerned, -1 for AllJoined and AllLeft
	Info RankInfo // that rank's info, when it has joined
	Err  error    // a *RankError for Failed, Lost and Aborted
}
