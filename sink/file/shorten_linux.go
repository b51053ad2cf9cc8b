package file

import "golang.org/x/sys/unix"

// pathMax is PATH_MAX: the longest path, with its NUL byte.
const pathMax = unix.PathMax

// fsNameMax returns the longest file name the file system of dir takes
// (NAME_MAX, as pathconf reports it), at most nameMax.
func fsNameMax(dir string) int {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil || st.Namelen <= 0 {
		return nameMax
	}
	return int(min(st.Namelen, nameMax))
}
