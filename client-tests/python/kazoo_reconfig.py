#!/usr/bin/env python3
"""kazoo's reconfig API against a three-member ensemble with reconfiguration on and a superuser
(`super:secret`): only the superuser may reconfigure, a stale `from_config` is BADVERSION and a
membership of one voter is BADARGUMENTS; removing member 3 (the leader of a fresh ensemble)
changes the configuration, whose `version=` line is the zxid of the change (the Stat's mzxid; the
node's version stays -1), hands the lead to member 1 in a new epoch (every member drops its
clients, which reconnect to their sessions) and leaves member 3 serving without a vote; adding
it back returns the new configuration and makes it vote again; the whole-membership form
rewrites the configuration; and a new membership without a running majority is
NEWCONFIGNOQUORUM.

    usage: kazoo_reconfig.py HOST:PORT,HOST:PORT,HOST:PORT CONTROL_URL

CONTROL_URL stops and starts members as for kazoo_ensemble.py. Prints `PASS name` /
`FAIL name: reason` per check and `N passed, M failed`; exits 1 if anything failed.
"""

import os
import sys

from kazoo.client import KazooClient
from kazoo.exceptions import (BadArgumentsError, BadVersionError, ConnectionLoss,
                              NewConfigNoQuorumError, NoAuthError)
from kazoo.protocol.states import KazooState

import kazoo_ensemble as ens
from kazoo.handlers.threading import KazooTimeoutError
from kazoo_suite import CheckFailed, expect, wait_until

SUPER = ("digest", "super:secret")
RETRY = {"max_tries": -1, "delay": 0.1, "max_delay": 1.0}
# Member 3's `server.3=` value before it was removed, to add it back as it was.
MEMBER_3 = []


def client(*members, superuser=True):
    """A started client of `members` (ids), tried in that order."""
    hosts = ",".join(ens.MEMBERS[m - 1] for m in members)
    auth = [SUPER] if superuser else None
    c = KazooClient(hosts=hosts, timeout=30.0, connection_retry=RETRY, randomize_hosts=False,
                    auth_data=auth)
    c.start(timeout=30)
    return c


def answer(result, what):
    """The answer to an asynchronous request, waiting at most 20 s (a hung request fails the
    check instead of the whole suite)."""
    try:
        return result.get(timeout=20)
    except KazooTimeoutError:
        raise CheckFailed("no answer to %s within 20 s" % what)


def reconfig(c, joining=None, leaving=None, new_members=None, from_config=-1):
    return answer(c.reconfig_async(joining, leaving, new_members, from_config),
                  "reconfig(%r, %r, %r, %r)" % (joining, leaving, new_members, from_config))


def parse(data):
    """{id: value} of the `server.N=` lines and the version of a configuration text."""
    servers, version = {}, None
    for line in data.decode().splitlines():
        key, _, value = line.partition("=")
        if key.startswith("server."):
            servers[int(key[len("server."):])] = value
        elif key == "version":
            version = int(value, 16)
    return servers, version


def expect_config(c, data, stat, ids):
    """The reconfig's answer and `/zookeeper/config` agree: members `ids`, all voting, version
    = the Stat's mzxid, node version -1."""
    servers, version = parse(data)
    expect(sorted(servers) == ids, "members %r, got %r" % (ids, data))
    expect(all(":participant" in v for v in servers.values()), "every member votes: %r" % data)
    expect(version == stat.mzxid, "version=%x is the change's zxid 0x%x" % (version, stat.mzxid))
    expect(stat.version == -1, "the node's version stays -1, got %d" % stat.version)
    expect(stat.data_length == len(data), "dataLength %d" % stat.data_length)
    answer(c.sync_async("/zookeeper/config"), "sync")
    now, now_stat = answer(c.get_async("/zookeeper/config"), "getConfig")
    expect(now == data, "/zookeeper/config holds the answer: %r" % now)
    expect(now_stat.mzxid == stat.mzxid, "the same mzxid")
    return version


def mntr(mid, key):
    for line in ens.word(mid, "mntr").splitlines():
        k, _, v = line.partition("\t")
        if k == key:
            return v
    return None


def only_the_superuser_reconfigures_with_the_current_version():
    anyone = client(1, superuser=False)
    su = client(1)
    try:
        data, stat = su.get("/zookeeper/config")
        servers, version = parse(data)
        expect(sorted(servers) == [1, 2, 3], "three members: %r" % data)
        expect(version == stat.mzxid and version >> 32 >= 1,
               "the first leader versions the configuration: version=%x, mzxid 0x%x" % (version, stat.mzxid))
        acl = su.get_acls("/zookeeper/config")[0]
        expect([(a.id.scheme, a.id.id, a.perms) for a in acl] == [("world", "anyone", 1)],
               "read-only for everyone: %r" % acl)
        try:
            reconfig(anyone, leaving="3")
            expect(False, "a client without the superuser reconfigured")
        except NoAuthError:
            pass
        try:
            reconfig(su, leaving="3", from_config=version + 1)
            expect(False, "a stale from_config was accepted")
        except BadVersionError:
            pass
        try:
            reconfig(su, leaving="2,3")
            expect(False, "a membership of one voter was accepted")
        except BadArgumentsError:
            pass
        expect(parse(su.get("/zookeeper/config")[0]) == (servers, version), "nothing changed")
        MEMBER_3[:] = [servers[3]]
    finally:
        anyone.stop()
        su.stop()


def removing_the_leader_hands_over_and_it_keeps_serving():
    expect(ens.leader() == 3, "member 3 leads a fresh ensemble, got %d" % ens.leader())
    su = client(1)
    other = client(2, superuser=False)
    states, other_states = [], []
    su.add_listener(states.append)
    other.add_listener(other_states.append)
    try:
        sessions = (su.client_id, other.client_id)
        data, stat = su.get("/zookeeper/config")
        version = parse(data)[1]
        # Every member syncs with the new leader and drops its clients: the answer may be lost
        # with the connection (CONNECTIONLOSS, or no answer at all), and is not asked for again.
        try:
            su.reconfig_async(None, "3", None, version).get(timeout=10)
        except (ConnectionLoss, KazooTimeoutError):
            pass
        wait_until(lambda: KazooState.SUSPENDED in other_states and KazooState.CONNECTED in other_states[1:],
                   "member 2's client reconnecting", timeout=30)
        wait_until(lambda: other.connected and su.connected, "both clients connected", timeout=30)
        now = (su.client_id, other.client_id)
        expect(now == sessions, "the same sessions: %r, then %r (states %r, %r)" % (sessions, now, states, other_states))
        expect(KazooState.LOST not in states + other_states, "no session lost")
        answer(other.sync_async("/zookeeper/config"), "sync")
        data, stat = answer(other.get_async("/zookeeper/config"), "getConfig")
        expect(stat.mzxid > version, "a newer version")
        expect_config(other, data, stat, [1, 2])
        wait_until(lambda: ens.srvr_mode(1) == "leader", "member 1 leading", timeout=30)
        expect(ens.leader() == 1, "the lowest remaining voter leads")
        expect(stat.mzxid >> 32 < ens_epoch(1), "the new leader starts a new epoch")
        wait_until(lambda: ens.srvr_mode(3) == "follower", "member 3 following", timeout=30)
        expect(mntr(1, "zk_quorum_size") == "2", "a quorum of two: %r" % mntr(1, "zk_quorum_size"))
        expect(mntr(1, "zk_synced_non_voting_followers") == "1", "member 3 follows without a vote")
        conf = ens.word(1, "conf")
        expect("server.3=" not in conf and "server.2=" in conf, "conf's membership: %r" % conf)
        # Member 3 still serves clients, and knows it is out.
        removed = client(3, superuser=False)
        try:
            removed.sync("/zookeeper/config")
            expect(sorted(parse(removed.get("/zookeeper/config")[0])[0]) == [1, 2], "member 3 reads the new membership")
            path = "/reconfig-kazoo-%d" % os.getpid()
            removed.create(path, b"written through a removed member")
            other.sync(path)
            expect(other.get(path)[0] == b"written through a removed member", "its write is everyone's")
            other.delete(path)
        finally:
            removed.stop()
    finally:
        su.stop()
        other.stop()


def ens_epoch(mid):
    """The epoch of member `mid`'s last zxid (`srvr`'s `Zxid:` line)."""
    for line in ens.word(mid, "srvr").splitlines():
        if line.startswith("Zxid: "):
            return int(line[len("Zxid: "):], 16) >> 32
    return -1


def adding_the_member_back_makes_it_vote():
    expect(MEMBER_3, "member 3's line was read")
    su = client(1)
    try:
        version = parse(su.get("/zookeeper/config")[0])[1]
        joining = "server.3=%s;%s" % (MEMBER_3[0].split(";")[0], ens.MEMBERS[2])
        data, stat = reconfig(su, joining=joining, from_config=version)
        version = expect_config(su, data, stat, [1, 2, 3])
        expect(parse(data)[0][3].endswith(";" + ens.MEMBERS[2]), "member 3's client address: %r" % data)
        expect(ens.leader() == 1, "the leader stays")
        wait_until(lambda: mntr(1, "zk_quorum_size") == "3", "a quorum of three again", timeout=30)
        expect(mntr(1, "zk_synced_non_voting_followers") == "0", "every follower votes")
        try:
            reconfig(su, leaving="3", from_config=stat.mzxid - 1)
            expect(False, "the version before the change was accepted")
        except BadVersionError:
            pass
        # The whole-membership form, with the members as they are: a new version only.
        servers = parse(data)[0]
        members = ",".join("server.%d=%s" % (i, v) for i, v in sorted(servers.items()))
        data, stat = reconfig(su, new_members=members, from_config=version)
        expect_config(su, data, stat, [1, 2, 3])
        expect(parse(data)[0] == servers, "the same members: %r" % data)
    finally:
        su.stop()


def a_new_membership_needs_a_running_majority():
    su = client(1)
    try:
        ens.member(2, "stop")
        # Members 1 and 3 still make a quorum of three; without member 1 the running voters
        # of the new membership (3 alone of 2 and 3) would not.
        # A real member stopping may drop the other members' clients for a moment.
        for _ in range(5):
            try:
                reconfig(su, leaving="1")
                expect(False, "a membership without a running majority was accepted")
            except NewConfigNoQuorumError:
                break
            except ConnectionLoss:
                wait_until(lambda: su.connected, "the client connected again", timeout=30)
        else:
            expect(False, "no answer but CONNECTIONLOSS")
        expect(sorted(parse(su.get("/zookeeper/config")[0])[0]) == [1, 2, 3], "nothing changed")
    finally:
        ens.member(2, "start")
        wait_until(lambda: ens.srvr_mode(2) == "follower", "member 2 following again", timeout=40)
        su.stop()


def main():
    return ens.suite_main(__doc__, 3, [
        ("kazoo_reconfig_only_the_superuser_with_the_current_version",
         only_the_superuser_reconfigures_with_the_current_version),
        ("kazoo_reconfig_removing_the_leader_hands_over_and_it_keeps_serving",
         removing_the_leader_hands_over_and_it_keeps_serving),
        ("kazoo_reconfig_adding_the_member_back_makes_it_vote", adding_the_member_back_makes_it_vote),
        ("kazoo_reconfig_a_new_membership_needs_a_running_majority",
         a_new_membership_needs_a_running_majority),
    ])


if __name__ == "__main__":
    sys.exit(main())
