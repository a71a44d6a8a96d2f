package bootstrap

import (
	"errors"
	"fmt"
	"os"

	"github.com/seed-760dd1f1/cc/runtime/wire"
)

// JobFromEnv reads the job identity ccrun gives a process that is not a
// rank (the CollNet aggregation server): CC_JOB_ID and the secret from
// CC_JOB_SECRET or the file CC_JOB_SECRET_FILE names, as Discover reads
// them for ranks. Both are required.
func JobFromEnv(lookup func(string) (string, bool)) (wire.Job, error) {
	e := env{lookup: lookup, readFile: os.ReadFile}
	id, ok := e.get("CC_JOB_ID")
	if !ok || id == "" {
		return wire.Job{}, errors.New("CC_JOB_ID is not set; ccrun sets it")
	}
	job := wire.Job{ID: id}
	if err := job.Validate(); err != nil {
		return wire.Job{}, fmt.Errorf("CC_JOB_ID: %w", err)
	}
	s, err := secret(e)
	if err != nil {
		return wire.Job{}, err
	}
	if len(s) == 0 {
		return wire.Job{}, errors.New("neither CC_JOB_SECRET nor CC_JOB_SECRET_FILE is set; ccrun sets one")
	}
	job.Secret = s
	return job, nil
}
