//! gRPC codecs that decode requests with prost and write responses straight from the
//! cache's shared bytes (see `xdst_core::wire`). Buffers start small: an idle stream
//! should cost as little as possible.

use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::{BufMut, Bytes};
use futures::StreamExt;
use futures::stream::BoxStream;
use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use xdst_core::delta::DeltaResponse;
use xdst_core::sotw::SotwResponse;
use xdst_core::wire;

/// Initial per-stream buffer size; buffers grow for large messages.
const BUFFER: usize = 512;
/// Flush the encode buffer to the socket past this many bytes.
const YIELD: usize = 32 * 1024;

/// Something the server writes.
pub trait Outgoing: Send + 'static {
    fn encoded_len(&self) -> usize;
    fn encode(&self, buf: &mut impl BufMut);
}

impl Outgoing for SotwResponse {
    fn encoded_len(&self) -> usize {
        wire::sotw_len(self)
    }
    fn encode(&self, buf: &mut impl BufMut) {
        wire::encode_sotw(self, buf)
    }
}

impl Outgoing for DeltaResponse {
    fn encoded_len(&self) -> usize {
        wire::delta_len(self)
    }
    fn encode(&self, buf: &mut impl BufMut) {
        wire::encode_delta(self, buf)
    }
}

/// A server stream's response body: each message framed in an allocation of its own, sized
/// exactly and freed once written, then the stream's status as trailers. tonic's encoder
/// copies every message of a stream into one buffer that then keeps the size of the largest
/// message for as long as the stream lives: with large configurations that is most of an
/// idle stream's memory (250 KB each at 1,000 routes and 1,000 Services; docs/PERFORMANCE.md,
/// "Where the memory goes at scale").
pub struct ResponseBody<Resp> {
    messages: Option<BoxStream<'static, Result<Resp, Status>>>,
}

impl<Resp: Outgoing> ResponseBody<Resp> {
    pub fn new(messages: BoxStream<'static, Result<Resp, Status>>) -> Self {
        ResponseBody { messages: Some(messages) }
    }
}

/// A gRPC message frame: the uncompressed flag, the length, the message.
pub fn frame(message: &impl Outgoing) -> Bytes {
    let len = message.encoded_len();
    let mut buf = Vec::with_capacity(5 + len);
    buf.push(0);
    buf.extend_from_slice(&u32::try_from(len).unwrap_or(u32::MAX).to_be_bytes());
    message.encode(&mut buf);
    Bytes::from(buf)
}

/// The trailers that end a stream with `status`.
fn trailers(status: &Status) -> http::HeaderMap {
    let mut headers = http::HeaderMap::new();
    if status.add_header(&mut headers).is_err() {
        // Only a message that is no header value fails; the code alone still says it.
        headers.insert(Status::GRPC_STATUS, http::HeaderValue::from(status.code() as i32));
    }
    headers
}

impl<Resp: Outgoing> http_body::Body for ResponseBody<Resp> {
    type Data = Bytes;
    type Error = Status;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<http_body::Frame<Bytes>, Status>>> {
        let this = self.get_mut();
        let Some(messages) = this.messages.as_mut() else { return Poll::Ready(None) };
        let frame = match ready!(messages.poll_next_unpin(cx)) {
            Some(Ok(message)) => http_body::Frame::data(frame(&message)),
            Some(Err(status)) => {
                this.messages = None;
                http_body::Frame::trailers(trailers(&status))
            }
            None => {
                this.messages = None;
                http_body::Frame::trailers(trailers(&Status::ok("")))
            }
        };
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.messages.is_none()
    }
}

/// Decodes `Req` with prost, encodes `Resp` from shared bytes.
pub struct XdsCodec<Req, Resp>(PhantomData<fn() -> (Req, Resp)>);

impl<Req, Resp> Default for XdsCodec<Req, Resp> {
    fn default() -> Self {
        XdsCodec(PhantomData)
    }
}

pub struct XdsEncoder<Resp>(PhantomData<fn() -> Resp>);
pub struct XdsDecoder<Req>(PhantomData<fn() -> Req>);

impl<Req> Default for XdsDecoder<Req> {
    fn default() -> Self {
        XdsDecoder(PhantomData)
    }
}

impl<Req, Resp> Codec for XdsCodec<Req, Resp>
where
    Req: Message + Default + Send + 'static,
    Resp: Outgoing,
{
    type Encode = Resp;
    type Decode = Req;
    type Encoder = XdsEncoder<Resp>;
    type Decoder = XdsDecoder<Req>;

    fn encoder(&mut self) -> Self::Encoder {
        XdsEncoder(PhantomData)
    }
    fn decoder(&mut self) -> Self::Decoder {
        XdsDecoder(PhantomData)
    }
}

impl<Resp: Outgoing> Encoder for XdsEncoder<Resp> {
    type Item = Resp;
    type Error = Status;

    fn encode(&mut self, item: Resp, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.reserve(item.encoded_len());
        item.encode(dst);
        Ok(())
    }
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(BUFFER, YIELD)
    }
}

impl<Req: Message + Default> Decoder for XdsDecoder<Req> {
    type Item = Req;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Req>, Status> {
        Req::decode(src).map(Some).map_err(|e| {
            Status::invalid_argument(format!(
                "malformed {}: {e}",
                std::any::type_name::<Req>().rsplit("::").next().unwrap_or("request")
            ))
        })
    }
    fn buffer_settings(&self) -> BufferSettings {
        BufferSettings::new(BUFFER, YIELD)
    }
}
