package main

import (
	"crypto/sha256"
	"fmt"
	"sort"
	"strings"
	"testing"
)

// digest covers every follow and every post, in order, so that any change in what a seed produces shows.
func digest(d dataset) string {
	h := sha256.New()
	for _, f := range d.follows {
		fmt.Fprintf(h, "f %d %d\n", f[0], f[1])
	}
	for _, p := range d.posts {
		fmt.Fprintf(h, "p %d %d %s\n", p.id, p.author, p.text)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// The digests were taken from the seed command's generation code as it was before generateDataset was
// split out of it: a plan's dataset (and so its results) stays the same one across ccbench versions.
func TestDatasetOfASeedIsTheOneEarlierVersionsLoaded(t *testing.T) {
	cases := []struct {
		users, posts, follows int
		zipf                  float64
		seed                  int64
		wantFollows, wantMax  int
		wantDigest            string
	}{
		{1000, 10, 20, 1.2, 1, 19464, 861, "b5173317ecdfa616d7d374b14a2a29897894cf75b03fc3115a3ffb897f84e621"},
		{100, 3, 5, 1.5, 7, 455, 73, "4ceecf9978d70094ec149841b35f6972a093c8ae9008aa45d75e15a77011317b"},
	}
	for _, c := range cases {
		d := generateDataset(c.users, c.posts, c.follows, c.zipf, c.seed)
		if len(d.follows) != c.wantFollows || d.maxFollowers() != c.wantMax || len(d.posts) != c.users*c.posts {
			t.Errorf("%+v: %d follows, most followers %d, %d posts", c, len(d.follows), d.maxFollowers(), len(d.posts))
		}
		if got := digest(d); got != c.wantDigest {
			t.Errorf("%+v: digest %s, want %s", c, got, c.wantDigest)
		}
	}
}

func TestSameSeedSameDatasetOtherSeedAnother(t *testing.T) {
	first := digest(generateDataset(200, 2, 10, 1.2, 42))
	if again := digest(generateDataset(200, 2, 10, 1.2, 42)); again != first {
		t.Fatalf("seed 42 gave two datasets")
	}
	if other := digest(generateDataset(200, 2, 10, 1.2, 43)); other == first {
		t.Fatalf("seeds 42 and 43 gave the same dataset")
	}
}

func TestFollowGraphHasNoSelfOrRepeatedFollowsAndFollowersAreItsInverse(t *testing.T) {
	const users = 500
	d := generateDataset(users, 1, 20, 1.2, 3)
	seen := map[[2]int32]bool{}
	outDegree := make([]int, users)
	inverse := make([][]int, users)
	for i, f := range d.follows {
		if f[0] == f[1] {
			t.Fatalf("user %d follows themself", f[0])
		}
		if seen[f] {
			t.Fatalf("follow %v appears twice", f)
		}
		if i > 0 {
			prev := d.follows[i-1]
			if prev[0] > f[0] || (prev[0] == f[0] && prev[1] >= f[1]) {
				t.Fatalf("follows out of order at %d: %v after %v", i, f, prev)
			}
		}
		seen[f] = true
		outDegree[f[0]]++
		inverse[f[1]] = append(inverse[f[1]], int(f[0]))
	}
	for u := 0; u < users; u++ {
		if outDegree[u] < 1 {
			t.Errorf("user %d follows nobody", u)
		}
		if fmt.Sprint(inverse[u]) != fmt.Sprint(d.followers[u]) {
			t.Errorf("followers of %d: %v, follows say %v", u, d.followers[u], inverse[u])
		}
	}
}

// Zipf popularity: a few users hold most followers (a heavy head), and the popular ones are spread
// over the id space rather than being the lowest ids.
func TestFollowerCountsHaveAHeavyHeadSpreadOverTheIds(t *testing.T) {
	const users = 1000
	d := generateDataset(users, 1, 20, 1.2, 1)
	counts := make([]int, users)
	for u, f := range d.followers {
		counts[u] = len(f)
	}
	byCount := make([]int, users)
	for u := range byCount {
		byCount[u] = u
	}
	sort.Slice(byCount, func(i, j int) bool { return counts[byCount[i]] > counts[byCount[j]] })
	top := 0
	for _, u := range byCount[:users/100] {
		top += counts[u]
	}
	if share := float64(top) / float64(len(d.follows)); share < 0.2 {
		t.Errorf("the top 1%% of users hold %.2f of the follows; uniform popularity would give them about 0.01", share)
	}
	median := counts[byCount[users/2]]
	if counts[byCount[0]] < 20*(median+1) {
		t.Errorf("most followers %d against a median of %d: no heavy head", counts[byCount[0]], median)
	}
	lowIDs := 0
	for _, u := range byCount[:10] {
		if u < 10 {
			lowIDs++
		}
	}
	if lowIDs == 10 {
		t.Errorf("the ten most followed users are ids 0..9: popularity is not shuffled over the ids")
	}
	mean := float64(len(d.follows)) / users
	if mean < 10 || mean > 22 {
		t.Errorf("mean follows per user %.1f, asked for about 20", mean)
	}
}

func TestPostsAreNumberedInTimeOrderWithTheirAuthorInTheText(t *testing.T) {
	const users = 50
	d := generateDataset(users, 4, 5, 1.5, 9)
	for i, p := range d.posts {
		if p.id != int64(i+1) {
			t.Fatalf("post %d has id %d", i, p.id)
		}
		if p.author < 0 || p.author >= users {
			t.Fatalf("post %d by user %d, outside 0..%d", p.id, p.author, users-1)
		}
		prefix := fmt.Sprintf("post %d by user %d: ", p.id, p.author)
		body := strings.TrimPrefix(p.text, prefix)
		if body == p.text || strings.Trim(body, "x") != "" || len(body) < 40 || len(body) >= 240 {
			t.Fatalf("post %d text %q", p.id, p.text)
		}
	}
}
