/* A stub resolver client, built statically against musl (scripts/build-stubs):
 *   resolve host NAME [unspec|inet|inet6] getaddrinfo(), one address a line
 *   resolve srv NAME                      res_query() for SRV, one record a line
 * as "PRIORITY WEIGHT PORT TARGET." (musl 1.2.3 never retries over TCP). Exit 2 with
 * the error on stderr when the lookup fails. */
#include <arpa/inet.h>
#include <arpa/nameser.h>
#include <netdb.h>
#include <netinet/in.h>
#include <resolv.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static int host(const char *name, const char *family) {
    struct addrinfo hints, *res, *ai;
    char text[INET6_ADDRSTRLEN];
    int rc;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = strcmp(family, "inet") == 0 ? AF_INET
                      : strcmp(family, "inet6") == 0 ? AF_INET6 : AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM; /* one entry per address */
    rc = getaddrinfo(name, NULL, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "getaddrinfo: %s\n", gai_strerror(rc));
        return 2;
    }
    for (ai = res; ai != NULL; ai = ai->ai_next) {
        const void *at = ai->ai_family == AF_INET
            ? (const void *)&((struct sockaddr_in *)ai->ai_addr)->sin_addr
            : (const void *)&((struct sockaddr_in6 *)ai->ai_addr)->sin6_addr;
        if (inet_ntop(ai->ai_family, at, text, sizeof text) != NULL)
            printf("%s\n", text);
    }
    freeaddrinfo(res);
    return 0;
}

static int srv(const char *name) {
    unsigned char answer[65536];
    char target[NS_MAXDNAME];
    ns_msg msg;
    ns_rr rr;
    int len, i, count;
    len = res_query(name, ns_c_in, ns_t_srv, answer, sizeof answer);
    if (len < 0) {
        fprintf(stderr, "res_query failed\n");
        return 2;
    }
    if (ns_initparse(answer, len, &msg) < 0) {
        fprintf(stderr, "ns_initparse failed\n");
        return 2;
    }
    count = ns_msg_count(msg, ns_s_an);
    for (i = 0; i < count; i++) {
        const unsigned char *rdata;
        if (ns_parserr(&msg, ns_s_an, i, &rr) < 0 || ns_rr_type(rr) != ns_t_srv)
            continue;
        rdata = ns_rr_rdata(rr);
        if (dn_expand(answer, answer + len, rdata + 6, target, sizeof target) < 0)
            continue;
        printf("%u %u %u %s.\n", ns_get16(rdata), ns_get16(rdata + 2), ns_get16(rdata + 4),
               target);
    }
    return count > 0 ? 0 : 2;
}

int main(int argc, char **argv) {
    if ((argc == 3 || argc == 4) && strcmp(argv[1], "host") == 0)
        return host(argv[2], argc == 4 ? argv[3] : "unspec");
    if (argc == 3 && strcmp(argv[1], "srv") == 0)
        return srv(argv[2]);
    fprintf(stderr, "usage: resolve host NAME [unspec|inet|inet6] | resolve srv NAME\n");
    return 64;
}
