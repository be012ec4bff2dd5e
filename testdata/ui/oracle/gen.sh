#!/bin/sh
# Regenerates testdata/ui/rendered.jsonl, the renderings of D23's oracle
# (PROTOCOL.md §7.5; see testdata/ui/README.md). Run from the repository
# root: ./testdata/ui/oracle/gen.sh
# Our module's test writes the texts (the corpus and the seeded
# compositions); goldmark renders them in a throwaway module in a
# temporary directory, so the extension module never requires it.
set -eu
root=$(pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
D23_TEXTS="$tmp/texts.jsonl" go test -count=1 -run '^TestD23CommonMarkOracle$' .
cp testdata/ui/oracle/main.go.txt "$tmp/main.go"
cd "$tmp"
go mod init d23oracle >/dev/null 2>&1
GOFLAGS=-mod=mod go get github.com/yuin/goldmark@v1.8.7 >/dev/null 2>&1
GOFLAGS=-mod=mod go run . <texts.jsonl >"$root/testdata/ui/rendered.jsonl"
