module github.com/sluice-go/sluice

go 1.26.8

require (
	github.com/stretchr/testify v1.12.1
	go.uber.org/automaxprocs v1.6.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sys v0.50.0
)

require (
	github.com/HdrHistogram/hdrhistogram-go v1.1.2 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
)
