#include "NetworkChanges.h"

#include <errno.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int brokerd_route_changes_socket(void) {
    int fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_ROUTE);
    if (fd < 0) return -1;
    struct sockaddr_nl address;
    memset(&address, 0, sizeof address);
    address.nl_family = AF_NETLINK;
    address.nl_groups = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR | RTMGRP_IPV4_ROUTE | RTMGRP_IPV6_ROUTE;
    if (bind(fd, (struct sockaddr *)&address, sizeof address) < 0) {
        int saved = errno;
        close(fd);
        errno = saved;
        return -1;
    }
    return fd;
}

int brokerd_route_changes_read(int fd) {
    char buffer[8192] __attribute__((aligned(__alignof__(struct nlmsghdr))));
    ssize_t length = recv(fd, buffer, sizeof buffer, 0);
    // ENOBUFS: the kernel dropped messages because we read too slowly; something changed, that much is certain.
    if (length < 0) return errno == ENOBUFS ? 1 : -1;
    int news = 0;
    for (struct nlmsghdr *header = (struct nlmsghdr *)buffer; NLMSG_OK(header, (unsigned int)length);
         header = NLMSG_NEXT(header, length)) {
        if (header->nlmsg_type == RTM_NEWLINK || header->nlmsg_type == RTM_NEWADDR || header->nlmsg_type == RTM_NEWROUTE) {
            news = 1;
        }
    }
    return news;
}
