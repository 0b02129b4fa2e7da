#pragma once

// A NETLINK_ROUTE socket (close-on-exec, non-blocking) subscribed to link, IPv4/IPv6 address and route changes:
// what tells brokerd that the network may be back. -1 with errno on failure.
int brokerd_route_changes_socket(void);

// Reads what is queued on that socket; returns 1 if it held a new link, address or route (RTM_NEWLINK,
// RTM_NEWADDR, RTM_NEWROUTE), 0 if only other messages, -1 when nothing was queued (EAGAIN) or on error.
int brokerd_route_changes_read(int fd);
