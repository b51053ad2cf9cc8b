# The README's test command is `make test`; CI (.ci/run) runs exactly it.
GO ?= go

.PHONY: test vet unit fuzz external bench demo build release release-check image verify-systemd

test: vet fuzz external unit

build:
	$(GO) build -o tide ./cmd/tide

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }
	@./scripts/readme-toc --check

# Tide as a library, used from another module through the public packages
# only (tests/external, with a replace of this module).
external:
	cd tests/external && $(GO) vet ./... && $(GO) mod tidy -diff && $(GO) test -count=1 ./...

# Every package under the race detector, in random order.
unit:
	$(GO) test -race -shuffle=on -timeout 25m ./...

# Each fuzz target runs briefly, on top of its seed corpus in testdata/fuzz.
fuzz:
	./scripts/fuzz-short.sh

bench:
	$(GO) test -run '^$$' -bench . -benchtime 1s ./...

demo:
	$(GO) run ./cmd/tide demo

# Static binaries for every released platform in dist/, with SHA256SUMS
# (VERSION=v1.2.3 names the release; default the tag of HEAD, else dev).
release:
	./scripts/release

# release, then the same build again from a copy of the commit elsewhere,
# with an empty build cache: the SHA256SUMS must be the same.
release-check:
	./scripts/release --check

# The container image tide:latest (Dockerfile), built with buildah.
image:
	./scripts/image

# packaging/tide@.service through systemd-analyze verify and security,
# against the linux binary make release built.
verify-systemd:
	./scripts/verify-systemd
