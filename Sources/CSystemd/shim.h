#pragma once
#include <systemd/sd-daemon.h>
#include <systemd/sd-journal.h>

// MARK: sd-bus (the com.microsoft.identity.broker1 front end)
#include <systemd/sd-bus.h>
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

// A method call handed to Swift: `handler(message, context)`. The vtable below is static (sd-bus keeps a pointer to
// it), so the Swift side is reached through this target passed as the object's userdata.
typedef int (*brokerd_bus_handler)(sd_bus_message *message, void *context);
struct brokerd_bus_target {
    brokerd_bus_handler handler;
    void *context;
};

static int brokerd_bus_trampoline(sd_bus_message *message, void *userdata, sd_bus_error *error) {
    (void)error;
    struct brokerd_bus_target *target = (struct brokerd_bus_target *)userdata;
    return target->handler(message, target->context);
}

// com.microsoft.identity.Broker1: eight methods, each (s protocol_version, s correlation_id, s request_json) → s.
static inline int brokerd_bus_add_broker1(sd_bus *bus, sd_bus_slot **slot, const char *path,
                                          struct brokerd_bus_target *target) {
    static const sd_bus_vtable vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD("acquireTokenInteractively", "sss", "s", brokerd_bus_trampoline, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("acquireTokenSilently", "sss", "s", brokerd_bus_trampoline, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("getAccounts", "sss", "s", brokerd_bus_trampoline, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("removeAccount", "sss", "s", brokerd_bus_trampoline, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("acquirePrtSsoCookie", "sss", "s", brokerd_bus_trampoline, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("generateSignedHttpRequest", "sss", "s", brokerd_bus_trampoline, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("cancelInteractiveFlow", "sss", "s", brokerd_bus_trampoline, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("getLinuxBrokerVersion", "sss", "s", brokerd_bus_trampoline, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
    };
    return sd_bus_add_object_vtable(bus, slot, path, "com.microsoft.identity.Broker1", vtable, target);
}

// sd_bus_message_read is variadic, so not callable from Swift.
static inline int brokerd_bus_read_sss(sd_bus_message *m, const char **a, const char **b, const char **c) {
    return sd_bus_message_read(m, "sss", a, b, c);
}

// A method's reply "s" from text the caller vouches is valid UTF-8 (a Swift String's): appended by its length, without the
// UTF-8 check and strlen that appending a C string makes sd-bus run over every byte (two kilobytes a token answer; the
// client checks them again as it reads). A NUL inside, which no D-Bus string may hold, is refused (-EBADMSG) before
// anything is sent.
static inline int brokerd_bus_reply_utf8(sd_bus_message *m, const char *s, size_t length) {
    if (memchr(s, 0, length) != NULL) return -EBADMSG;
    if (!sd_bus_message_get_expect_reply(m)) return 0;
    sd_bus_message *reply = NULL;
    int r = sd_bus_message_new_method_return(m, &reply);
    if (r < 0) return r;
    struct iovec piece = { .iov_base = (void *)s, .iov_len = length };
    r = sd_bus_message_append_string_iovec(reply, &piece, 1);
    if (r >= 0) r = sd_bus_send(NULL, reply, NULL);
    sd_bus_message_unref(reply);
    return r;
}

static inline int brokerd_bus_reply_error(sd_bus_message *m, const char *name, const char *text) {
    sd_bus_error error = SD_BUS_ERROR_NULL;
    sd_bus_error_set(&error, name, text);
    int r = sd_bus_reply_method_error(m, &error);
    sd_bus_error_free(&error);
    return r;
}

// The sender of a call as the bus knows it (GetConnectionCredentials, cached by the bus when the peer connected): its
// unique name, effective uid, pid and LSM label (LinuxSecurityLabel), each copied out. A field the bus did not give is
// left empty (pid 0): fields sd-bus would fill in from /proc ("augmented") are refused, since they describe whoever has
// the pid now. <0: unknown sender.
static inline int brokerd_bus_sender_identity(sd_bus_message *m, uid_t *uid, pid_t *pid, char *unique, size_t unique_size,
                                              char *label, size_t label_size) {
    sd_bus_creds *creds = NULL;
    int r = sd_bus_query_sender_creds(m, SD_BUS_CREDS_EUID | SD_BUS_CREDS_PID | SD_BUS_CREDS_SELINUX_CONTEXT |
                                      SD_BUS_CREDS_UNIQUE_NAME, &creds);
    if (r < 0) return r;
    uint64_t augmented = sd_bus_creds_get_augmented_mask(creds);
    r = sd_bus_creds_get_euid(creds, uid);
    if (r >= 0) {
        if ((augmented & SD_BUS_CREDS_PID) || sd_bus_creds_get_pid(creds, pid) < 0) *pid = 0;
        const char *text = NULL;
        unique[0] = 0;
        if (unique_size > 0 && sd_bus_creds_get_unique_name(creds, &text) >= 0 && text) {
            strncpy(unique, text, unique_size - 1);
            unique[unique_size - 1] = 0;
        }
        text = NULL;
        label[0] = 0;
        if (label_size > 0 && !(augmented & SD_BUS_CREDS_SELINUX_CONTEXT) &&
            sd_bus_creds_get_selinux_context(creds, &text) >= 0 && text) {
            strncpy(label, text, label_size - 1);
            label[label_size - 1] = 0;
        }
    }
    sd_bus_creds_unref(creds);
    return r;
}

#include <errno.h>
#include <fcntl.h>

// ProcessFD from GetConnectionCredentials (dbus-daemon 1.15.8+, dbus-broker 34+, on Linux 6.5+): a pidfd of the
// sender's process, taken by the bus when the sender connected; duplicated (the reply owns its descriptor).
// -ENODATA when the bus hands out none (Debian 12's buses), another negative errno on failure.
static inline int brokerd_bus_sender_pidfd(sd_bus *bus, const char *sender) {
    sd_bus_message *reply = NULL;
    int r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "GetConnectionCredentials", NULL, &reply, "s", sender);
    if (r < 0) return r;
    int result = -ENODATA;
    r = sd_bus_message_enter_container(reply, 'a', "{sv}");
    while (r > 0 && (r = sd_bus_message_enter_container(reply, 'e', "sv")) > 0) {
        const char *key = NULL;
        r = sd_bus_message_read(reply, "s", &key);
        if (r < 0) break;
        if (key && strcmp(key, "ProcessFD") == 0 && result == -ENODATA) {
            int fd = -1;
            r = sd_bus_message_read(reply, "v", "h", &fd);
            if (r >= 0 && fd >= 0) {
                result = fcntl(fd, F_DUPFD_CLOEXEC, 3);
                if (result < 0) result = -errno;
            }
        } else {
            r = sd_bus_message_skip(reply, "v");
        }
        if (r < 0) break;
        r = sd_bus_message_exit_container(reply);
    }
    sd_bus_message_unref(reply);
    return result;
}

#include <sys/eventfd.h>

// Wakes the D-Bus front end's thread when an answer is ready (sys/eventfd.h is not in Swift's Glibc module).
static inline int brokerd_wake_fd(void) {
    return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
}

// MARK: org.freedesktop.Notifications (a waiting device-code sign-in on the desktop)
#include <stdint.h>

static inline void brokerd_copy_error(const sd_bus_error *e, int r, char *out, size_t size) {
    if (size == 0) return;
    const char *text = (e && e->message) ? e->message : (e && e->name) ? e->name : strerror(r < 0 ? -r : r);
    strncpy(out, text, size - 1);
    out[size - 1] = 0;
}

// 1 when `name` has an owner on the bus, 0 when not, <0 on error. Asks the bus only: never starts (activates) a service.
static inline int brokerd_bus_name_has_owner(sd_bus *bus, const char *name) {
    sd_bus_message *reply = NULL;
    int r = sd_bus_call_method(bus, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "NameHasOwner", NULL, &reply, "s", name);
    if (r < 0) return r;
    int owned = 0;
    r = sd_bus_message_read(reply, "b", &owned);
    sd_bus_message_unref(reply);
    return r < 0 ? r : (owned ? 1 : 0);
}

// Notify(app_name, replaces_id, app_icon, summary, body, actions, hints, expire_timeout) → the notification's id.
// Critical urgency and no expiry: the app waits for the user, so the notification stays until brokerd closes it.
// On failure `error` gets the server's (or sd-bus's) reason.
static inline int brokerd_notify(sd_bus *bus, const char *summary, const char *body, uint32_t *id, char *error,
                                 size_t error_size) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    int r = sd_bus_call_method(bus, "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
                               "org.freedesktop.Notifications", "Notify", &e, &reply, "susssasa{sv}i", "brokerd",
                               (uint32_t)0, "dialog-password", summary, body, 0, 1, "urgency", "y", 2, (int32_t)0);
    if (r >= 0) {
        r = sd_bus_message_read(reply, "u", id);
        sd_bus_message_unref(reply);
    }
    if (r < 0) brokerd_copy_error(&e, r, error, error_size);
    sd_bus_error_free(&e);
    return r;
}

// Notify with the actions of a consent: "allow" (Allow), "allow-once" (Allow once), "deny" (Deny). Critical urgency, no
// expiry: the app waits for the answer, and brokerd closes the notification when the question is over.
// `server` gets the unique name of the server that answered: only signals from it are believed.
static inline int brokerd_notify_consent(sd_bus *bus, const char *summary, const char *body, uint32_t *id, char *server,
                                         size_t server_size, char *error, size_t error_size) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    sd_bus_message *reply = NULL;
    int r = sd_bus_call_method(bus, "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
                               "org.freedesktop.Notifications", "Notify", &e, &reply, "susssasa{sv}i", "brokerd",
                               (uint32_t)0, "dialog-password", summary, body, 6, "allow", "Allow", "allow-once", "Allow once",
                               "deny", "Deny", 1, "urgency", "y", 2, (int32_t)0);
    if (r >= 0) {
        r = sd_bus_message_read(reply, "u", id);
        const char *sender = sd_bus_message_get_sender(reply);
        if (server_size > 0) {
            strncpy(server, sender ? sender : "", server_size - 1);
            server[server_size - 1] = 0;
        }
        sd_bus_message_unref(reply);
    }
    if (r < 0) brokerd_copy_error(&e, r, error, error_size);
    sd_bus_error_free(&e);
    return r;
}

// ActionInvoked(id, action_key) and NotificationClosed(id, reason), handed to Swift as handler(id, action, sender,
// context); action is NULL for NotificationClosed; sender is the signal's unique sender name.
typedef void (*brokerd_notification_handler)(uint32_t id, const char *action, const char *sender, void *context);
struct brokerd_notification_target {
    brokerd_notification_handler handler;
    void *context;
};

static int brokerd_action_invoked(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    uint32_t id = 0;
    const char *action = NULL;
    if (sd_bus_message_read(m, "us", &id, &action) < 0 || !action) return 0;
    struct brokerd_notification_target *target = (struct brokerd_notification_target *)userdata;
    target->handler(id, action, sd_bus_message_get_sender(m), target->context);
    return 0;
}

static int brokerd_notification_closed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    uint32_t id = 0, reason = 0;
    if (sd_bus_message_read(m, "uu", &id, &reason) < 0) return 0;
    struct brokerd_notification_target *target = (struct brokerd_notification_target *)userdata;
    target->handler(id, NULL, sd_bus_message_get_sender(m), target->context);
    return 0;
}

// Subscribes to the notification server's two signals on `bus`.
static inline int brokerd_watch_notifications(sd_bus *bus, struct brokerd_notification_target *target) {
    int r = sd_bus_match_signal(bus, NULL, "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
                                "org.freedesktop.Notifications", "ActionInvoked", brokerd_action_invoked, target);
    if (r < 0) return r;
    return sd_bus_match_signal(bus, NULL, "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
                               "org.freedesktop.Notifications", "NotificationClosed", brokerd_notification_closed, target);
}

// CloseNotification(id).
static inline int brokerd_close_notification(sd_bus *bus, uint32_t id, char *error, size_t error_size) {
    sd_bus_error e = SD_BUS_ERROR_NULL;
    int r = sd_bus_call_method(bus, "org.freedesktop.Notifications", "/org/freedesktop/Notifications",
                               "org.freedesktop.Notifications", "CloseNotification", &e, NULL, "u", id);
    if (r < 0) brokerd_copy_error(&e, r, error, error_size);
    sd_bus_error_free(&e);
    return r;
}

// MARK: System bus signals that say the network may be back (SystemEvents)

// What a system signal said: resumed from suspend (logind's PrepareForSleep(false)), or NetworkManager's state
// changed to `value` (70 is NM_STATE_CONNECTED_GLOBAL).
enum brokerd_system_event { BROKERD_RESUMED = 1, BROKERD_NETWORK_STATE = 2 };

struct brokerd_system_event_target {
    void (*handler)(int event, uint32_t value, void *context);
    void *context;
};

static int brokerd_prepare_for_sleep(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    int sleeping = 0;
    if (sd_bus_message_read(m, "b", &sleeping) < 0 || sleeping) return 0;
    struct brokerd_system_event_target *target = (struct brokerd_system_event_target *)userdata;
    target->handler(BROKERD_RESUMED, 0, target->context);
    return 0;
}

static int brokerd_network_state_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    uint32_t state = 0;
    if (sd_bus_message_read(m, "u", &state) < 0) return 0;
    struct brokerd_system_event_target *target = (struct brokerd_system_event_target *)userdata;
    target->handler(BROKERD_NETWORK_STATE, state, target->context);
    return 0;
}

// Subscribes to both signals, by path, interface and member, whoever sends them: on the real system bus only logind
// and NetworkManager own those names, and a forged signal can do no more than make brokerd try the network early.
static inline int brokerd_watch_system_events(sd_bus *bus, struct brokerd_system_event_target *target) {
    int r = sd_bus_match_signal(bus, NULL, NULL, "/org/freedesktop/login1", "org.freedesktop.login1.Manager",
                                "PrepareForSleep", brokerd_prepare_for_sleep, target);
    if (r < 0) return r;
    return sd_bus_match_signal(bus, NULL, NULL, "/org/freedesktop/NetworkManager", "org.freedesktop.NetworkManager",
                               "StateChanged", brokerd_network_state_changed, target);
}

// MARK: The Secret Service changing (a cache waiting for its key may open now)

enum { BROKERD_SECRET_SERVICE_CHANGED = 3 };

static int brokerd_secrets_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    const char *name = NULL, *old_owner = NULL, *new_owner = NULL;
    if (sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0) return 0;
    // A provider took the name (gnome-keyring, KeePassXC, KWallet started or replaced another).
    if (name && strcmp(name, "org.freedesktop.secrets") == 0 && new_owner && new_owner[0] != '\0') {
        struct brokerd_system_event_target *target = (struct brokerd_system_event_target *)userdata;
        target->handler(BROKERD_SECRET_SERVICE_CHANGED, 0, target->context);
    }
    return 0;
}

static int brokerd_secrets_collection_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)m;
    (void)error;
    struct brokerd_system_event_target *target = (struct brokerd_system_event_target *)userdata;
    target->handler(BROKERD_SECRET_SERVICE_CHANGED, 0, target->context);
    return 0;
}

// On the session bus: the bus daemon's NameOwnerChanged (org.freedesktop.secrets got an owner) and the Secret
// Service's CollectionChanged (a collection was unlocked, or its items changed). A forged signal can do no more than
// make brokerd read the key store once more.
static inline int brokerd_watch_secret_service(sd_bus *bus, struct brokerd_system_event_target *target) {
    int r = sd_bus_match_signal(bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                                "NameOwnerChanged", brokerd_secrets_owner_changed, target);
    if (r < 0) return r;
    return sd_bus_match_signal(bus, NULL, NULL, "/org/freedesktop/secrets", "org.freedesktop.Secret.Service",
                               "CollectionChanged", brokerd_secrets_collection_changed, target);
}

// MARK: Callers that leave the bus (the D-Bus front end)

typedef void (*brokerd_name_left_handler)(const char *unique_name, void *context);

struct brokerd_name_left_target {
    brokerd_name_left_handler handler;
    void *context;
};

static int brokerd_name_owner_changed(sd_bus_message *m, void *userdata, sd_bus_error *error) {
    (void)error;
    const char *name = NULL, *old_owner = NULL, *new_owner = NULL;
    if (sd_bus_message_read(m, "sss", &name, &old_owner, &new_owner) < 0) return 0;
    // A unique name (":1.42") that lost its owner: that connection closed. Unique names are never reused.
    if (name && name[0] == ':' && new_owner && new_owner[0] == '\0') {
        struct brokerd_name_left_target *target = (struct brokerd_name_left_target *)userdata;
        target->handler(name, target->context);
    }
    return 0;
}

// Subscribes to the bus daemon's NameOwnerChanged (only the bus itself, org.freedesktop.DBus, is believed).
static inline int brokerd_watch_names_leaving(sd_bus *bus, struct brokerd_name_left_target *target) {
    return sd_bus_match_signal(bus, NULL, "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                               "NameOwnerChanged", brokerd_name_owner_changed, target);
}
