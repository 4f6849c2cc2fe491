"""A running loop seen from other machines over Zenoh (the optional `zenoh` extra): the bridge
process that publishes a loop's shared state (`zenoh_bridge`), and the client a remote twin or
`hil robots --zenoh` uses (`zenoh_client`). The loop itself does no network I/O."""
