#pragma once
// libqrencode (libqrencode-dev / qrencode-devel): brokerctl shows a device-code sign-in's address as a QR code.
#include <qrencode.h>
