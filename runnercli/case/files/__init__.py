"""A running case's files on request (the fs rendezvous): the poll parked for members'
requests and the answers (`rendezvous`, through `calls`), and the `Files` stage (`stage`),
which opens the case's working directory to it while the case runs."""
