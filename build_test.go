package tide

import "context"

// build parses text and builds its pipeline, as tide run does.
func build(ctx context.Context, text []byte, opts Options) (*Pipeline, error) {
	spec, err := Parse(text, opts)
	if err != nil {
		return nil, err
	}
	return spec.Build(ctx)
}

// buildFenced is build for a worker's owner.
func buildFenced(ctx context.Context, text []byte, opts Options, owner string) (*Pipeline, error) {
	spec, err := Parse(text, opts)
	if err != nil {
		return nil, err
	}
	return spec.BuildFenced(ctx, owner)
}
