package mongo

import "net/url"

// urlParse returns uri with any password replaced.
func urlParse(uri string) (string, error) {
	u, err := url.Parse(uri)
	if err != nil {
		return "", err
	}
	return u.Redacted(), nil
}
