package main

import (
	"bytes"
	"context"
	"errors"
	"log"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// An app without stores: the tests below reach only what answers before a store is asked.
func storeless() *app { return &app{timeout: time.Second} }

func get(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	recorder := httptest.NewRecorder()
	h.ServeHTTP(recorder, httptest.NewRequest(http.MethodGet, target, nil))
	return recorder
}

func TestRoutesServeHealthAndRefuseUnknownPaths(t *testing.T) {
	mux := storeless().routes()
	if r := get(t, mux, "/health"); r.Code != http.StatusOK || r.Body.String() != "ok\n" {
		t.Errorf("/health: %d %q", r.Code, r.Body.String())
	}
	if r := get(t, mux, "/wrk2-api/nothing"); r.Code != http.StatusNotFound {
		t.Errorf("an unknown path answered %d", r.Code)
	}
}

// Every operation of the request mix is routed to a handler that checks its parameters first: a
// request without user_id is the client's error (400), with the Server-Timing header all the same,
// and is not counted among the server's errors.
func TestEveryOperationRefusesAMissingUserAsABadRequest(t *testing.T) {
	a := storeless()
	mux := a.routes()
	for _, path := range []string{
		"/wrk2-api/home-timeline/read?start=0&stop=10",
		"/wrk2-api/user-timeline/read?start=0",
		"/wrk2-api/post/compose?text=hello",
		"/wrk2-api/user/follow?followee_id=3",
		"/wrk2-api/user/follow?user_id=3",
	} {
		r := get(t, mux, path)
		if r.Code != http.StatusBadRequest {
			t.Errorf("%s answered %d, want 400", path, r.Code)
		}
		if !strings.Contains(r.Body.String(), "missing parameter") {
			t.Errorf("%s: body %q names no missing parameter", path, r.Body.String())
		}
		if !strings.HasPrefix(r.Header().Get("Server-Timing"), "pg;dur=0.000, redis;dur=0.000, memcached;dur=0.000, app;dur=") {
			t.Errorf("%s: Server-Timing %q", path, r.Header().Get("Server-Timing"))
		}
	}
	if a.errors.Load() != 0 {
		t.Errorf("bad requests were counted as server errors: %d", a.errors.Load())
	}
}

func TestFailingStoreIsAServerErrorWithItsTimingAndCountedAndLogged(t *testing.T) {
	var logged bytes.Buffer
	log.SetOutput(&logged)
	defer log.SetOutput(os.Stderr)
	a := storeless()
	h := a.handle(func(ctx context.Context, tm *timing, r *http.Request) (any, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Errorf("the handler's context has no deadline")
		}
		tm.redis += 1500 * time.Microsecond
		return nil, errors.New("redis: connection refused")
	})
	r := get(t, h, "/wrk2-api/home-timeline/read?user_id=1")
	if r.Code != http.StatusInternalServerError || !strings.Contains(r.Body.String(), "redis: connection refused") {
		t.Errorf("answered %d %q", r.Code, r.Body.String())
	}
	if got := r.Header().Get("Server-Timing"); !strings.HasPrefix(got, "pg;dur=0.000, redis;dur=1.500, memcached;dur=0.000, app;dur=") {
		t.Errorf("Server-Timing %q", got)
	}
	if a.errors.Load() != 1 {
		t.Errorf("%d errors counted, want 1", a.errors.Load())
	}
	if !strings.Contains(logged.String(), "/wrk2-api/home-timeline/read: redis: connection refused") {
		t.Errorf("the error was not logged with its path: %q", logged.String())
	}
}

func TestSuccessfulHandlerAnswersJSON(t *testing.T) {
	h := storeless().handle(func(context.Context, *timing, *http.Request) (any, error) {
		return map[string]any{"followed": 7}, nil
	})
	r := get(t, h, "/x")
	if r.Code != http.StatusOK || r.Header().Get("Content-Type") != "application/json" || r.Body.String() != "{\"followed\":7}\n" {
		t.Errorf("answered %d %q %q", r.Code, r.Header().Get("Content-Type"), r.Body.String())
	}
}

func TestServerTimingNamesEveryTierInMilliseconds(t *testing.T) {
	tm := timing{pg: 2500 * time.Microsecond, redis: 250 * time.Microsecond, memcached: time.Millisecond}
	want := "pg;dur=2.500, redis;dur=0.250, memcached;dur=1.000, app;dur=4.125"
	if got := tm.header(4125 * time.Microsecond); got != want {
		t.Errorf("header %q, want %q", got, want)
	}
}

func TestParametersComeFromTheQueryOrAForm(t *testing.T) {
	query := httptest.NewRequest(http.MethodGet, "/?user_id=12&start=", nil)
	if v, err := intParam(query, "user_id", -1); err != nil || v != 12 {
		t.Errorf("user_id from the query: %d %v", v, err)
	}
	if v, err := intParam(query, "start", 0); err != nil || v != 0 {
		t.Errorf("an empty start falls back to 0: %d %v", v, err)
	}
	if _, err := intParam(query, "followee_id", -1); err == nil || err.Error() != "missing parameter followee_id" {
		t.Errorf("a required parameter that is missing: %v", err)
	}
	if _, err := intParam(httptest.NewRequest(http.MethodGet, "/?user_id=abc", nil), "user_id", -1); err == nil {
		t.Errorf("user_id=abc was accepted")
	}
	form := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(url.Values{"user_id": {"5"}}.Encode()))
	form.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if v, err := intParam(form, "user_id", -1); err != nil || v != 5 {
		t.Errorf("user_id from a POST form: %d %v", v, err)
	}
}
