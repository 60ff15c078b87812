package main

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
)

// seedPost is one post of the seeded dataset; ids number the posts in time order from 1.
type seedPost struct {
	id     int64
	author int
	text   string
}

// dataset is the seeded social network before it is written to PostgreSQL and Redis.
type dataset struct {
	// follows holds (follower, followee) pairs, by follower, then by followee
	follows [][2]int32
	// followers[u] lists who follows user u, in follower order
	followers [][]int
	posts     []seedPost
}

// generateDataset draws the dataset from randomSeed alone, so every run (and every machine) of a plan
// loads the same one: each user follows a geometric number of others around meanFollows, chosen by a
// Zipf law over a shuffled popularity rank (a few users have most followers, spread over the id
// space); posts have random authors and bodies.
func generateDataset(users, postsPerUser, meanFollows int, zipfS float64, randomSeed int64) dataset {
	rng := rand.New(rand.NewSource(randomSeed))
	// popularity rank -> user id, shuffled so that popular users are spread over the id space
	rank := rng.Perm(users)
	zipf := rand.NewZipf(rng, zipfS, 1, uint64(users-1))
	data := dataset{followers: make([][]int, users)}
	for u := 0; u < users; u++ {
		// out-degree: geometric around the mean, at least 1
		n := 1 + int(rng.ExpFloat64()*float64(meanFollows-1))
		chosen := map[int]bool{}
		for tries := 0; len(chosen) < n && tries < 20*n; tries++ {
			followee := rank[zipf.Uint64()]
			if followee != u {
				chosen[followee] = true
			}
		}
		ids := make([]int, 0, len(chosen))
		for f := range chosen {
			ids = append(ids, f)
		}
		sort.Ints(ids)
		for _, f := range ids {
			data.follows = append(data.follows, [2]int32{int32(u), int32(f)})
			data.followers[f] = append(data.followers[f], u)
		}
	}
	total := users * postsPerUser
	data.posts = make([]seedPost, 0, total)
	for i := 0; i < total; i++ {
		author := rng.Intn(users)
		text := fmt.Sprintf("post %d by user %d: %s", i+1, author, strings.Repeat("x", 40+rng.Intn(200)))
		data.posts = append(data.posts, seedPost{id: int64(i + 1), author: author, text: text})
	}
	return data
}

// maxFollowers is the largest in-degree of the follow graph.
func (d dataset) maxFollowers() int {
	most := 0
	for _, f := range d.followers {
		if len(f) > most {
			most = len(f)
		}
	}
	return most
}
