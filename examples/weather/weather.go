// Package weather is the example service of "Rejecting requests" (see
// docs/background.md): a request asks for a
// city's forecast, the server does some CPU work and queries a database,
// and returns the forecast as JSON. The CPU work and the database's wait
// are configurable, so that the same handler can be CPU-bound or I/O-bound,
// and the database can wait in the two ways the design distinguishes:
// through await.Sleep, which on sluice releases the worker while it waits
// (I/O-bound work, "io_isolated" in docs/background.md), or with a plain
// time.Sleep, which holds it (the "isolated" model there). On net/http both are a sleeping goroutine.
//
// The benchmarks (bench/) serve this handler from every target, and
// cmd/weather runs it:
//
//	go run ./examples/weather/cmd/weather -cpu 1ms -db 10ms
//	curl -s 'localhost:8080/forecast?city=Lisbon'
package weather

import (
	"context"
	"encoding/json"
	"hash/fnv"
	"net/http"
	"time"

	"github.com/sluice-go/sluice/await"
)

// Config shapes the service's work per request.
type Config struct {
	// CPU is the CPU time each request spends computing (a Spinner's):
	// the same on every machine, and whatever the CPU the request gets
	// meanwhile. Zero means none.
	CPU time.Duration
	// SpinRate, when positive, is the rate of the Spinner that does the
	// CPU work (SpinnerAt), so that servers compared side by side do the
	// same work per request; zero or less measures it (NewSpinner).
	SpinRate float64
	// DB is how long the simulated database takes to answer. Zero means
	// it answers at once.
	DB time.Duration
	// Blocking makes the database wait with time.Sleep, holding a sluice
	// worker for the whole wait, instead of await.Sleep.
	Blocking bool
}

// Forecast is the answer.
type Forecast struct {
	City        string  `json:"city"`
	Summary     string  `json:"summary"`
	Temperature float64 `json:"temperature_c"`
	Rain        float64 `json:"rain_probability"`
}

// summaries are what the database knows how to say.
var summaries = [...]string{"sunny", "cloudy", "rain", "showers", "wind", "fog"}

// Handler returns the service's http.Handler: GET /forecast?city=NAME.
func Handler(opts Config) http.Handler {
	var spin *Spinner
	if opts.CPU > 0 {
		spin = SpinnerFor(opts.SpinRate)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /forecast", func(w http.ResponseWriter, r *http.Request) {
		city := r.URL.Query().Get("city")
		if city == "" {
			http.Error(w, "missing city", http.StatusBadRequest)
			return
		}
		if spin != nil {
			spin.Spin(opts.CPU)
		}
		f, err := query(r.Context(), opts, city)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(f)
	})
	return mux
}

// query is the simulated database: it waits opts.DB, then derives a
// forecast from the city's name, so the same city always gets the same one.
func query(ctx context.Context, opts Config, city string) (Forecast, error) {
	if opts.DB > 0 {
		if opts.Blocking {
			time.Sleep(opts.DB)
		} else if err := await.Sleep(ctx, opts.DB); err != nil {
			return Forecast{}, err
		}
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(city))
	v := h.Sum64()
	return Forecast{
		City:        city,
		Summary:     summaries[v%uint64(len(summaries))],
		Temperature: float64(int64(v>>8)%400-100) / 10,
		Rain:        float64((v>>20)%101) / 100,
	}, nil
}
