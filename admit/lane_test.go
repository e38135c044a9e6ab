package admit_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/sluice-go/sluice/admit"
	"github.com/sluice-go/sluice/queue"
)

func TestClassByLane(t *testing.T) {
	classes := map[string]queue.Class{"background": queue.Sheddable, "checkout": queue.Critical}
	classify := admit.ClassByLane(classes, queue.Default)
	classes["background"] = queue.Critical // the function keeps its own copy
	assert.Equal(t, queue.Sheddable, classify(&admit.Attempt{Lane: "background"}))
	assert.Equal(t, queue.Critical, classify(&admit.Attempt{Lane: "checkout"}))
	assert.Equal(t, queue.Default, classify(&admit.Attempt{Lane: "other"}))
	assert.Equal(t, queue.Default, classify(&admit.Attempt{}))
}
