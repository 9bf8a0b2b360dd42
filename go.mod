module github.com/pipette-launch/pipette-launch

go 1.26.0

require (
	github.com/hashicorp/go-multierror v1.1.1
	github.com/kevinburke/ssh_config v1.6.0
	github.com/melbahja/goph v1.5.2
	github.com/urfave/cli/v2 v2.27.7
	golang.org/x/crypto v0.58.0
	gopkg.in/yaml.v3 v3.0.1
)

require (
	github.com/cpuguy83/go-md2man/v2 v2.0.7 // indirect
	github.com/hashicorp/errwrap v1.0.0 // indirect
	github.com/kr/fs v0.1.0 // indirect
	github.com/pkg/errors v0.9.1 // indirect
	github.com/pkg/sftp v1.13.11 // indirect
	github.com/russross/blackfriday/v2 v2.1.0 // indirect
	github.com/xrash/smetrics v0.0.0-20240521201337-686a1a2994c1 // indirect
	golang.org/x/sys v0.49.0 // indirect
)
